// Switchboard console: copy buttons, the workspace switcher, the custom-scope matrix, the instance form's provider
// settings and the cURL builder.
// No dependencies, no inline script (the pages send a strict Content-Security-Policy).
'use strict';

document.documentElement.classList.add('js');

function copyText(text, button) {
  const done = () => {
    const label = button.textContent;
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = label; }, 1500);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text) && done());
  } else if (fallbackCopy(text)) {
    done();
  }
}

function fallbackCopy(text) {
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'offscreen';
  document.body.appendChild(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch { ok = false; }
  area.remove();
  return ok;
}

document.addEventListener('click', (event) => {
  const button = event.target.closest('[data-copy]');
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (source) copyText(source.textContent.trim(), button);
});

// Delegated, so that selects of sections drawn again (data-refresh) submit too.
document.addEventListener('change', (event) => {
  if (event.target.matches('select[data-autosubmit]')) event.target.form.submit();
});

// The custom matrix only matters when "Custom" is chosen.
const customScopes = document.getElementById('custom-scopes');
if (customScopes) {
  const presets = document.querySelectorAll('input[name="preset"]');
  const sync = () => {
    const custom = document.querySelector('input[name="preset"]:checked')?.value === 'custom';
    customScopes.hidden = !custom;
  };
  presets.forEach((radio) => radio.addEventListener('change', sync));
  sync();
}

// The instance form shows only the chosen provider's settings; the others are hidden and disabled, so that they
// are not sent either (without script every provider's settings show, and the server reads the chosen one's).
const providerChoices = document.querySelectorAll('input[name="provider"]');
if (providerChoices.length) {
  const syncProvider = () => {
    const chosen = document.querySelector('input[name="provider"]:checked')?.value;
    document.querySelectorAll('fieldset.provider-config').forEach((settings) => {
      const shown = settings.id === `config-${chosen}`;
      settings.hidden = !shown;
      settings.disabled = !shown;
    });
  };
  providerChoices.forEach((radio) => radio.addEventListener('change', syncProvider));
  syncProvider();
}

// ---- cURL builder -------------------------------------------------------------------------------------------
const builder = document.getElementById('curl-builder');
if (builder) initBuilder(builder);

async function initBuilder(root) {
  const base = root.dataset.baseUrl || window.location.origin;
  const keyInput = document.getElementById('curl-key');
  const select = document.getElementById('curl-operation');
  const paramsBox = document.getElementById('curl-params');
  const bodyField = document.getElementById('curl-body-field');
  const bodyInput = document.getElementById('curl-body');
  const output = document.getElementById('curl-command');
  const sendButton = document.getElementById('curl-send');
  const responseBox = document.getElementById('curl-response');

  const newSecret = document.getElementById('new-key-secret');
  if (newSecret) keyInput.value = newSecret.textContent.trim();

  let spec;
  try {
    const res = await fetch('/openapi.json', { headers: { Accept: 'application/json' } });
    spec = await res.json();
  } catch (err) {
    select.innerHTML = '<option value="">Could not load /openapi.json</option>';
    return;
  }
  const deref = (obj) => {
    let seen = 0;
    while (obj && obj.$ref && seen++ < 10) {
      obj = obj.$ref.replace(/^#\//, '').split('/')
        .reduce((node, part) => node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], spec);
    }
    return obj || {};
  };

  const operations = [];
  for (const [path, item] of Object.entries(spec.paths || {})) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
      const op = item[method];
      if (!op) continue;
      const params = [...(item.parameters || []), ...(op.parameters || [])].map(deref);
      const media = deref(op.requestBody)?.content?.['application/json'];
      const security = op.security ?? spec.security ?? [];
      operations.push({
        id: op.operationId, method: method.toUpperCase(), path, summary: op.summary || op.operationId,
        tag: (op.tags && op.tags[0]) || 'Other', params, media, authenticated: security.length > 0,
      });
    }
  }
  select.innerHTML = '';
  const groups = {};
  for (const op of operations) {
    if (!groups[op.tag]) {
      groups[op.tag] = document.createElement('optgroup');
      groups[op.tag].label = op.tag;
      select.appendChild(groups[op.tag]);
    }
    const option = document.createElement('option');
    option.value = op.id;
    option.textContent = `${op.method} ${op.path} — ${op.summary}`;
    groups[op.tag].appendChild(option);
  }

  const exampleOf = (param) => {
    const schema = deref(param.schema);
    const value = param.example ?? Object.values(param.examples || {})[0]?.value ?? schema.example ?? schema.default;
    return value === undefined ? '' : String(value);
  };
  const bodyExample = (media) => {
    if (!media) return '';
    const value = media.example ?? deref(Object.values(media.examples || {})[0])?.value ?? deref(media.schema).example;
    return value === undefined ? '{}' : JSON.stringify(value, null, 2);
  };
  const current = () => operations.find((op) => op.id === select.value);

  const renderParams = () => {
    const op = current();
    paramsBox.innerHTML = '';
    for (const param of op.params.filter((p) => p.in === 'path' || p.in === 'query')) {
      const id = `curl-param-${param.in}-${param.name}`;
      const field = document.createElement('div');
      field.className = 'field';
      const label = document.createElement('label');
      label.htmlFor = id;
      label.textContent = `${param.name} (${param.in}${param.required ? ', required' : ''})`;
      const input = document.createElement('input');
      input.id = id;
      input.dataset.in = param.in;
      input.dataset.name = param.name;
      input.value = exampleOf(param);
      input.addEventListener('input', renderCommand);
      field.append(label, input);
      paramsBox.appendChild(field);
    }
    bodyField.hidden = !op.media;
    bodyInput.value = bodyExample(op.media);
    renderCommand();
  };

  const quote = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`;
  const request = () => {
    const op = current();
    let path = op.path;
    const query = new URLSearchParams();
    for (const input of paramsBox.querySelectorAll('input')) {
      if (input.dataset.in === 'path') {
        path = path.replace(`{${input.dataset.name}}`, encodeURIComponent(input.value));
      } else if (input.value !== '') {
        query.append(input.dataset.name, input.value);
      }
    }
    const qs = query.toString();
    const headers = { Accept: 'application/json' };
    const key = keyInput.value.trim();
    if (op.authenticated) headers.Authorization = `Bearer ${key || 'sb_sk_…'}`;
    let body;
    if (op.media) {
      headers['Content-Type'] = 'application/json';
      body = bodyInput.value;
    }
    return { method: op.method, url: `${base}${path}${qs ? `?${qs}` : ''}`, headers, body };
  };

  function renderCommand() {
    if (!current()) return;
    const req = request();
    const lines = [`curl -X ${req.method} ${quote(req.url)}`];
    for (const [name, value] of Object.entries(req.headers)) lines.push(`  -H ${quote(`${name}: ${value}`)}`);
    if (req.body !== undefined) lines.push(`  --data ${quote(req.body)}`);
    output.textContent = lines.join(' \\\n');
  }

  sendButton.addEventListener('click', async () => {
    const req = request();
    responseBox.hidden = false;
    responseBox.textContent = 'Sending…';
    try {
      const res = await fetch(req.url, { method: req.method, headers: req.headers, body: req.body });
      const text = await res.text();
      let pretty = text;
      try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch { /* not JSON */ }
      responseBox.textContent = `HTTP ${res.status} ${res.statusText}\n\n${pretty}`;
    } catch (err) {
      responseBox.textContent = `Request failed: ${err.message}`;
    }
  });

  keyInput.addEventListener('input', renderCommand);
  bodyInput.addEventListener('input', renderCommand);
  select.addEventListener('change', renderParams);
  const models = operations.find((op) => op.id === 'listModels');
  if (models) select.value = models.id;
  renderParams();
}

// ---- Time zones and live sections -------------------------------------------------------------------------
// Pages that show times in a zone ask for the browser's: a page marked data-needs-tz reloads once with ?tz=…, and a
// form field marked data-browser-tz is filled with it (the server reads a date typed into the form in that zone).
const browserZone = (() => {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || ''; } catch { return ''; }
})();
for (const input of document.querySelectorAll('input[data-browser-tz]')) {
  if (!input.value) input.value = browserZone;
}
if (browserZone && document.querySelector('[data-needs-tz]')) {
  const url = new URL(window.location.href);
  if (!url.searchParams.has('tz')) {
    url.searchParams.set('tz', browserZone);
    window.location.replace(url.toString());
  }
}

// A section marked data-refresh="N" is fetched again every N seconds while the page is visible and replaced by its
// new rendering (the server draws it; nothing here interprets data).
for (const section of document.querySelectorAll('[data-refresh][id]')) {
  const every = Math.max(2, Number(section.dataset.refresh) || 5) * 1000;
  const refresh = async () => {
    if (document.hidden) return;
    if (section.contains(document.activeElement) && document.activeElement.tagName === 'SELECT') return;
    try {
      const res = await fetch(window.location.href, { headers: { Accept: 'text/html' }, credentials: 'same-origin' });
      if (!res.ok || res.redirected) return;
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      const fresh = doc.getElementById(section.id);
      if (fresh) section.replaceChildren(...fresh.childNodes);
    } catch { /* offline for a moment: try again next time */ }
  };
  setInterval(refresh, every);
}
