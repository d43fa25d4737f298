// make e2e-n8n: Switchboard with a real n8n (the npm package pinned in this folder), headless on loopback.
//
// Three workflows, imported with n8n's own CLI and published:
//   - "publish": an n8n Webhook trigger takes an order, a Code node signs it (HMAC-SHA256, the source's secret), an
//     HTTP Request node posts it to a Switchboard source's ingest URL;
//   - "receive": an n8n Webhook trigger subscribed to Switchboard events (a Switchboard webhook) checks the Standard
//     Webhooks signature over the raw body in a Code node and reports the verdict to a receiver of this test.
//   - "bot": a workflow bot of a sandbox instance — an n8n Webhook trigger takes each message the bot is asked about,
//     a Code node checks its Standard Webhooks signature (the bot's signing secret) and a Respond to Webhook node
//     answers {"reply": …}, which Switchboard sends to the chat: the other sandbox instance receives it.
// The event the first workflow publishes reaches a third receiver (this test's, verified with the official
// standardwebhooks library) and the second workflow, which finds its signature valid; a forged delivery to the
// second workflow is found invalid.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { startSwitchboard } from '../server.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const n8nBin = join(here, 'node_modules', '.bin', 'n8n');
const sourceSecret = 'n8n-e2e-source-secret-0123456789';

async function freePort() {
  const { default: net } = await import('node:net');
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
    srv.on('error', reject);
  });
}

async function until(what, fn, ms = 60000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A receiver that keeps every request with its raw body. */
async function startReceiver() {
  const requests = [];
  const srv = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      requests.push({ path: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const port = await freePort();
  await new Promise((r) => srv.listen(port, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${port}`, requests, close: () => srv.close() };
}

function webhookNode(name, path, webhookId, rawBody, responseMode = 'onReceived') {
  return {
    parameters: { httpMethod: 'POST', path, responseMode, options: rawBody ? { rawBody: true } : {} },
    name, type: 'n8n-nodes-base.webhook', typeVersion: 2, position: [0, 0], webhookId,
  };
}

function codeNode(name, jsCode) {
  return { parameters: { mode: 'runOnceForAllItems', jsCode }, name, type: 'n8n-nodes-base.code', typeVersion: 2, position: [250, 0] };
}

function httpNode(name, url, headers) {
  return {
    parameters: {
      method: 'POST', url, sendHeaders: headers.length > 0,
      headerParameters: { parameters: headers },
      sendBody: true, contentType: 'raw', rawContentType: 'application/json', body: '={{ $json.body }}', options: {},
    },
    name, type: 'n8n-nodes-base.httpRequest', typeVersion: 4.2, position: [500, 0],
  };
}

function respondNode(name) {
  return { parameters: { respondWith: 'json', responseBody: '={{ $json.answer }}', options: {} }, name,
    type: 'n8n-nodes-base.respondToWebhook', typeVersion: 1.1, position: [500, 0] };
}

function workflow(id, name, nodes) {
  const connections = {};
  for (let i = 0; i + 1 < nodes.length; i++) {
    connections[nodes[i].name] = { main: [[{ node: nodes[i + 1].name, type: 'main', index: 0 }]] };
  }
  return { id, name, active: true, nodes, connections, settings: { executionOrder: 'v1' } };
}

test('n8n publishes to a source and verifies the signed webhooks of its events', { timeout: 600_000 }, async () => {
  const receiver = await startReceiver();
  const sb = await startSwitchboard(['--webhook-allow-http', '--webhook-allowed-networks', '127.0.0.0/8']);
  const n8nPort = await freePort();
  const n8nURL = `http://127.0.0.1:${n8nPort}`;
  let n8n;
  try {
    const ws = sb.cli(['workspace', 'create', '--name', 'n8n']);
    const key = sb.cli(['key', 'create', '--workspace', ws.id, '--name', 'n8n', '--scopes', 'automation:write,webhooks:write,messaging:write']).secret;
    const api = async (method, path, body) => {
      const res = await fetch(sb.url + path, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: body && JSON.stringify(body) });
      const out = await res.json();
      assert.ok(res.ok, `${method} ${path}: ${res.status} ${JSON.stringify(out)}`);
      return out;
    };
    const source = await api('POST', '/api/v1/sources', { name: 'n8n orders', event_type: 'custom.n8n.order',
      verification: { scheme: 'hmac', secret: sourceSecret, header: 'X-Signature' } });
    const toN8n = await api('POST', '/api/v1/webhooks', { url: `${n8nURL}/webhook/switchboard-events`, events: ['custom.n8n.order'] });
    const toReceiver = await api('POST', '/api/v1/webhooks', { url: `${receiver.url}/switchboard`, events: ['custom.n8n.order'] });

    // Two sandbox instances; Bob's bot is the third workflow.
    const connected = async (name) => {
      const inst = await api('POST', '/api/v1/instances', { name, provider: 'sandbox', config: { auto_pair: true, display_name: name } });
      await api('POST', `/api/v1/instances/${inst.id}/connect`);
      return until(`${name} connected`, async () => {
        const i = await api('GET', `/api/v1/instances/${inst.id}`);
        return i.status === 'connected' && i;
      });
    };
    const alice = await connected('Alice');
    const bob = await connected('Bob');
    const bot = await api('POST', `/api/v1/instances/${bob.id}/bots`, { name: 'n8n support', kind: 'workflow',
      workflow: { url: `${n8nURL}/webhook/bot`, timeout_seconds: 30 } });

    // The workflows, with the secrets they need, imported and published with n8n's CLI.
    const sign = `const crypto = require('crypto');
const body = JSON.stringify($input.first().json.body);
const sig = crypto.createHmac('sha256', ${JSON.stringify(sourceSecret)}).update(body).digest('hex');
return [{ json: { body, sig } }];`;
    const verify = `const crypto = require('crypto');
const item = $input.first();
const raw = (await this.helpers.getBinaryDataBuffer(0, 'data')).toString('utf8');
const h = item.json.headers;
const secret = Buffer.from(${JSON.stringify(toN8n.secret)}.slice('whsec_'.length), 'base64');
const expected = crypto.createHmac('sha256', secret).update(h['webhook-id'] + '.' + h['webhook-timestamp'] + '.' + raw).digest('base64');
const fresh = Math.abs(Date.now() / 1000 - Number(h['webhook-timestamp'])) < 300;
const verified = fresh && String(h['webhook-signature'] || '').split(' ').some((s) => s === 'v1,' + expected);
let id = null; try { id = JSON.parse(raw).id; } catch (e) {}
return [{ json: { body: JSON.stringify({ verified, id, webhook_id: h['webhook-id'] }) } }];`;
    const answer = `const crypto = require('crypto');
const item = $input.first();
const raw = (await this.helpers.getBinaryDataBuffer(0, 'data')).toString('utf8');
const h = item.json.headers;
const secret = Buffer.from(${JSON.stringify(bot.signing_secret)}.slice('whsec_'.length), 'base64');
const expected = crypto.createHmac('sha256', secret).update(h['webhook-id'] + '.' + h['webhook-timestamp'] + '.' + raw).digest('base64');
const verified = String(h['webhook-signature'] || '').split(' ').some((s) => s === 'v1,' + expected);
const asked = JSON.parse(raw);
const reply = verified ? 'n8n here: you wrote "' + asked.message.text + '" (' + asked.history.length + ' in the chat so far)' : 'unverified';
return [{ json: { answer: JSON.stringify({ reply }) } }];`;
    const botFlow = workflow('sbBot00000000001', 'bot', [
      webhookNode('Message', 'bot', '7d1c2a90-0000-4000-8000-000000000003', true, 'responseNode'),
      codeNode('Answer', answer),
      respondNode('Reply'),
    ]);
    const publish = workflow('sbPublish0000001', 'publish', [
      webhookNode('Order', 'publish', '7d1c2a90-0000-4000-8000-000000000001', false),
      codeNode('Sign', sign),
      httpNode('To Switchboard', source.ingest_url, [{ name: 'X-Signature', value: '={{ $json.sig }}' }]),
    ]);
    const receive = workflow('sbReceive0000001', 'receive', [
      webhookNode('Switchboard event', 'switchboard-events', '7d1c2a90-0000-4000-8000-000000000002', true),
      codeNode('Verify', verify),
      httpNode('Report', `${receiver.url}/n8n-verified`, []),
    ]);
    const home = mkdtempSync(join(tmpdir(), 'switchboard-n8n-'));
    const env = { ...process.env, N8N_USER_FOLDER: home, N8N_PORT: String(n8nPort), N8N_LISTEN_ADDRESS: '127.0.0.1',
      N8N_HOST: '127.0.0.1', WEBHOOK_URL: `${n8nURL}/`, N8N_DIAGNOSTICS_ENABLED: 'false',
      N8N_VERSION_NOTIFICATIONS_ENABLED: 'false', N8N_TEMPLATES_ENABLED: 'false', N8N_PERSONALIZATION_ENABLED: 'false',
      N8N_SECURE_COOKIE: 'false', NODE_FUNCTION_ALLOW_BUILTIN: 'crypto', N8N_BLOCK_ENV_ACCESS_IN_NODE: 'true',
      N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS: 'true', DB_SQLITE_POOL_SIZE: '1' };
    for (const wf of [publish, receive, botFlow]) {
      const file = join(home, `${wf.name}.json`);
      writeFileSync(file, JSON.stringify(wf));
      execFileSync(n8nBin, ['import:workflow', `--input=${file}`], { env, stdio: 'pipe' });
      execFileSync(n8nBin, ['publish:workflow', `--id=${wf.id}`], { env, stdio: 'pipe' });
    }
    let logs = '';
    n8n = spawn(n8nBin, ['start'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    n8n.stdout.on('data', (d) => { logs += d; });
    n8n.stderr.on('data', (d) => { logs += d; });
    await until('n8n to serve its webhooks', async () => {
      try { return (await fetch(`${n8nURL}/healthz/readiness`)).ok; } catch { return false; }
    }, 180_000).catch((e) => { throw new Error(`${e.message}\n${logs}`); });

    // An order into the publish workflow → the source → an event → both subscribers.
    // Readiness comes before the published workflows' webhooks are registered: the first order waits for them.
    const started = Date.now();
    let res;
    await until('the publish workflow\'s webhook', async () => {
      res = await fetch(`${n8nURL}/webhook/publish`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ order: 'SB-1042', amount: 1200 }) });
      return res.status !== 404;
    }, 120_000).catch((e) => { throw new Error(`${e.message}\n${logs}`); });
    assert.equal(res.status, 200, `publish webhook: ${res.status} ${await res.text()}\n${logs}`);

    const delivery = await until('the event at the receiver', () => receiver.requests.find((r) => r.path === '/switchboard'))
      .catch((e) => { throw new Error(`${e.message}\n${logs}`); });
    const event = new Webhook(toReceiver.secret).verify(delivery.body, delivery.headers);
    assert.equal(event.type, 'custom.n8n.order');
    assert.equal(event.data.order, 'SB-1042');
    assert.equal(event.data.amount, 1200);

    const report = await until('n8n\'s verdict', () => receiver.requests.find((r) => r.path === '/n8n-verified'))
      .catch((e) => { throw new Error(`${e.message}\n${logs}`); });
    const verdict = JSON.parse(report.body);
    assert.deepEqual({ verified: verdict.verified, id: verdict.id }, { verified: true, id: event.id });
    console.log(`n8n → source → event → n8n verified in ${Date.now() - started} ms`);

    // A forged delivery to the receiving workflow is found invalid.
    const forged = JSON.stringify({ ...event, data: { order: 'FORGED' } });
    await fetch(`${n8nURL}/webhook/switchboard-events`, { method: 'POST', body: forged, headers: {
      'content-type': 'application/json', 'webhook-id': 'msg_forged', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
      'webhook-signature': 'v1,' + Buffer.from('not a signature').toString('base64') } });
    const forgedReport = await until('n8n\'s verdict on the forgery', () => receiver.requests.find((r) =>
      r.path === '/n8n-verified' && JSON.parse(r.body).webhook_id === 'msg_forged'));
    assert.equal(JSON.parse(forgedReport.body).verified, false);

    // Alice writes to Bob; Bob's n8n workflow bot answers, and Alice receives the answer.
    const botStarted = Date.now();
    await api('POST', `/api/v1/instances/${alice.id}/messages`, { to: bob.account.address, type: 'text',
      text: 'Where is order SB-1042?' });
    const replyText = 'n8n here: you wrote "Where is order SB-1042?" (1 in the chat so far)';
    await until('the n8n bot\'s reply at Alice', async () => {
      const inbox = await api('GET', `/api/v1/instances/${alice.id}/messages?direction=inbound`);
      return inbox.data.find((m) => m.text === replyText);
    }).catch(async (e) => {
      const b = await api('GET', `/api/v1/instances/${bob.id}/bots/${bot.id}`);
      throw new Error(`${e.message}\nbot runs: ${JSON.stringify(b.recent_runs)}\n${logs}`);
    });
    const runs = (await api('GET', `/api/v1/instances/${bob.id}/bots/${bot.id}`)).recent_runs;
    assert.equal(runs[0].status, 'replied');
    console.log(`Alice → Bob → n8n bot → Alice in ${Date.now() - botStarted} ms`);

    // The source's request log shows the accepted request.
    const log = await api('GET', `/api/v1/sources/${source.id}/requests`);
    assert.equal(log.data[0].outcome, 'accepted');
  } finally {
    if (n8n) await new Promise((r) => { n8n.on('exit', r); n8n.kill('SIGTERM'); setTimeout(() => n8n.kill('SIGKILL'), 10_000); });
    await sb.stop();
    receiver.close();
  }
});
