// Calls Switchboard from a page with browser keys (sb_pk_…): creates a short link and publishes a custom event,
// and shows each answer — or the problem's title, detail and code — in the page. Everything shown is set as text,
// never as HTML, so nothing a server answers can run in the page.

const secretKey = /^sb_sk_/;

/** post sends body as JSON to path on server with key; it returns {ok, status, body}. */
async function post(server, key, path, body) {
  let res;
  try {
    res = await fetch(new URL(path, server), {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
  } catch (err) {
    // A network failure, or an answer the browser would not let the page read (a server that does not answer CORS).
    return { ok: false, status: 0, body: { title: 'Switchboard could not be reached', detail: `${err.message} (is the URL right?)` } };
  }
  const answer = await res.json().catch(() => ({ title: `HTTP ${res.status}`, detail: 'The answer was not JSON.' }));
  return { ok: res.ok, status: res.status, body: answer };
}

/** showProblem writes an RFC 9457 problem readably: "Title — detail (code, status)". */
function showProblem(el, problem, status) {
  el.dataset.state = 'problem';
  el.dataset.code = problem.code ?? '';
  const what = [problem.code, status ? `HTTP ${status}` : ''].filter(Boolean).join(', ');
  el.textContent = `${problem.title ?? 'Error'} — ${problem.detail ?? ''}${what ? ` (${what})` : ''}`;
}

async function createLink(el, server, key, destination) {
  const r = await post(server, key, '/api/v1/links', { destination_url: destination });
  if (!r.ok) return showProblem(el, r.body, r.status);
  el.dataset.state = 'ok';
  el.dataset.id = r.body.id;
  const a = document.createElement('a');
  a.href = r.body.short_url;
  a.textContent = r.body.short_url;
  el.replaceChildren('Short link: ', a, ` (${r.body.id})`);
}

async function publishEvent(el, server, key, type, data) {
  const r = await post(server, key, '/api/v1/events', { type, data });
  if (!r.ok) return showProblem(el, r.body, r.status);
  el.dataset.state = 'ok';
  el.dataset.id = r.body.id;
  el.textContent = `Event ${r.body.id} published (${r.body.type}).`;
}

const form = document.getElementById('embed');
form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const f = new FormData(form);
  const server = f.get('server').trim();
  const linkKey = f.get('link_key').trim();
  const eventKey = f.get('event_key').trim();
  const linkEl = document.getElementById('link-result');
  const eventEl = document.getElementById('event-result');
  form.dataset.state = 'sending';
  for (const el of [linkEl, eventEl]) {
    delete el.dataset.code;
    delete el.dataset.id;
    el.dataset.state = 'sending';
    el.textContent = 'Sending…';
  }
  // A secret key in a page is readable by every visitor: refuse it before it leaves the page.
  if (secretKey.test(linkKey) || secretKey.test(eventKey)) {
    for (const el of [linkEl, eventEl]) {
      showProblem(el, { title: 'A secret key in a page', detail: 'Use a browser key (sb_pk_…) here, and revoke the secret key: anyone who saw this page could use it.' });
    }
    form.dataset.state = 'done';
    return;
  }
  const destination = f.get('destination_url').trim() || location.href;
  await Promise.all([
    createLink(linkEl, server, linkKey, destination),
    publishEvent(eventEl, server, eventKey, f.get('event_type').trim(), { page: location.href }),
  ]);
  form.dataset.state = 'done';
});
form.dataset.state = 'ready';
