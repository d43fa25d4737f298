// Switchboard console: live sections. A page's sections marked data-live="types" (event types, family wildcards
// or *, comma-separated; data-live-instance narrows them to an instance) follow the workspace's event stream: on
// each event the page is fetched again and those sections are swapped for their new rendering, which the server
// draws as on any load (nothing here interprets an event's data). The stream is the API's own
// (GET /api/v1/events/stream), opened with a short-lived stream token the console mints for the session
// (POST /user/stream-token, with the session's CSRF token): the page never holds an API key.
// While a section shows something still pending (data-live-pending: a delivery under way), it is fetched again
// every second, since its outcome is no event. Without script the pages reload themselves instead.
// No dependencies, no inline script (the pages send a strict Content-Security-Policy).
'use strict';

(() => {
  const liveSections = () => [...document.querySelectorAll('[data-live][id]')];
  const initial = liveSections();
  const csrf = document.querySelector('input[name="csrf_token"]')?.value;
  if (!initial.length || !csrf || !window.fetch || !window.TextDecoderStream) return;

  const types = new Set();
  const instances = new Set();
  for (const section of initial) {
    const named = section.dataset.live.split(',').map((t) => t.trim()).filter(Boolean);
    (named.length ? named : ['*']).forEach((t) => types.add(t));
    if (section.dataset.liveInstance) instances.add(section.dataset.liveInstance);
  }
  const root = document.documentElement;
  const state = (s) => { root.dataset.live = s; };
  state('connecting');

  // ---- Drawing the sections again -----------------------------------------------------------------------------
  let refreshing = false;
  let again = false;
  let pendingTimer = 0;
  const busy = (section) => {
    const active = document.activeElement;
    return section.contains(active) && ['INPUT', 'SELECT', 'TEXTAREA'].includes(active.tagName);
  };
  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      // X-Console-Live: only the live sections are swapped in, so the server skips what the others ask the network.
      const res = await fetch(window.location.href, {
        headers: { Accept: 'text/html', 'X-Console-Live': '1' }, credentials: 'same-origin',
      });
      if (!res.ok || res.redirected) return;
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      for (const section of liveSections()) {
        const fresh = doc.getElementById(section.id);
        if (!fresh || busy(section)) continue;
        // Details the reader opened stay open (keyed by the nearest data-event-id or their id).
        const keyOf = (el) => el.closest('[data-event-id]')?.dataset.eventId || el.id;
        const open = new Set([...section.querySelectorAll('details[open]')].map(keyOf).filter(Boolean));
        for (const d of fresh.querySelectorAll('details')) if (open.has(keyOf(d))) d.open = true;
        section.replaceChildren(...[...fresh.childNodes].map((n) => document.importNode(n, true)));
      }
      root.dataset.liveRefreshes = String(Number(root.dataset.liveRefreshes || 0) + 1);
    } catch { /* offline for a moment: the next event or reconnection draws them */ } finally {
      refreshing = false;
      if (again) { again = false; refresh(); } else if (!pendingTimer && document.querySelector('[data-live] [data-live-pending]')) {
        pendingTimer = setTimeout(() => { pendingTimer = 0; refresh(); }, 1000);
      }
    }
  }
  let soon = 0;
  const refreshSoon = () => { if (!soon) soon = setTimeout(() => { soon = 0; refresh(); }, 100); };

  // ---- Following the stream -------------------------------------------------------------------------------------
  const leaving = new AbortController();
  window.addEventListener('pagehide', () => leaving.abort());
  let failures = 0;
  let poll = 0; // the fallback while the stream cannot be followed: sections drawn again every 5 s
  const startPolling = () => { if (!poll) poll = setInterval(() => { if (!document.hidden) refresh(); }, 5000); };
  const stopPolling = () => { clearInterval(poll); poll = 0; };

  async function follow() {
    const tokenRes = await fetch('/user/stream-token', {
      method: 'POST', credentials: 'same-origin', signal: leaving.signal,
      headers: { Accept: 'application/json' }, body: new URLSearchParams({ csrf_token: csrf }),
    });
    if (!tokenRes.ok || tokenRes.redirected) throw new Error(`stream token: HTTP ${tokenRes.status}`);
    const { token, url } = await tokenRes.json();
    const query = new URLSearchParams({ access_token: token });
    types.forEach((t) => query.append('types', t));
    instances.forEach((i) => query.append('instance_ids', i));
    const res = await fetch(`${url}?${query}`, { headers: { Accept: 'text/event-stream' }, signal: leaving.signal });
    if (!res.ok || !res.body) throw new Error(`stream: HTTP ${res.status}`);
    // Subscribed: whatever committed before is in a fresh rendering, whatever commits after comes as events.
    failures = 0;
    stopPolling();
    state('open');
    refresh();
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const lines = block.split('\n');
        if (lines.some((l) => l.startsWith('id:'))) {
          root.dataset.liveLastEvent = lines.find((l) => l.startsWith('id:')).slice(3).trim();
          refreshSoon();
        } else if (lines.includes('event: error')) {
          return; // too far behind: reconnect (and draw afresh)
        }
      }
    }
  }

  (async () => {
    while (!leaving.signal.aborted) {
      try { await follow(); } catch { failures++; }
      if (leaving.signal.aborted) return;
      state('reconnecting');
      if (failures >= 2) startPolling();
      const wait = Math.min(30000, 1000 * 2 ** Math.min(failures, 5)) * (0.8 + 0.4 * Math.random());
      await new Promise((r) => setTimeout(r, wait));
    }
  })();
})();
