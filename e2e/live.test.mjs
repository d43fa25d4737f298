// Live pages in a real browser: the instance page, an endpoint's delivery log and the event log follow the event
// stream (a static module, a stream token the console mints for the session) — a change made through the API shows
// on the open page without a reload. Without script, the instance page reloads itself instead.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { join } from 'node:path';
import { screenshotDir, signUpWithWorkspace, withSwitchboard } from './server.mjs';

const app = withSwitchboard(['--send-rate', '0', '--webhook-allow-http', '--webhook-allowed-networks', '127.0.0.0/8']);

let receiver;
let key;

before(async () => {
  receiver = http.createServer((req, res) => { req.resume(); req.on('end', () => res.writeHead(204).end()); });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
});

after(async () => {
  receiver?.close();
});

const api = async (method, path, body) => {
  const res = await fetch(`${app.sb.url}${path}`, {
    method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
};

// A page that has not reloaded keeps what was set on its window.
const markPage = (page) => page.evaluate(() => { window.stillTheSamePage = true; });
const samePage = (page) => page.evaluate(() => window.stillTheSamePage === true);
const liveOpen = (page) => page.locator('html[data-live="open"]').waitFor({ timeout: 15000 });

test('the instance page, the delivery log and the event log follow changes made through the API', async () => {
  const context = await app.browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of 4\d\d/.test(msg.text())) errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  const shot = (name) => page.screenshot({ path: join(screenshotDir, `live-${name}.png`), fullPage: true });

  await signUpWithWorkspace(page, app.sb.url, 'live@example.com', 'Acme live');
  const ws = app.sb.cli(['workspace', 'list']).find((w) => w.name === 'Acme live');
  key = app.sb.cli(['key', 'create', '--workspace', ws.id, '--name', 'live', '--scopes',
    'messaging:write,links:write,webhooks:write']).secret;

  // Bob pairs by himself; Alice waits for her QR code to be scanned.
  const bob = await api('POST', '/api/v1/instances', { name: 'Bob', provider: 'sandbox', config: { auto_pair: true } });
  await api('POST', `/api/v1/instances/${bob.id}/connect`);
  const alice = await api('POST', '/api/v1/instances', { name: 'Alice', provider: 'sandbox' });

  await page.goto(`${app.sb.url}/user/channels/${alice.id}`);
  await liveOpen(page);
  await markPage(page);
  assert.equal(await page.locator('#instance-status').getAttribute('data-status'), 'created');
  await shot('01-instance-created');

  // Connect through the API: the page shows the QR code, then the connection once it is scanned.
  await api('POST', `/api/v1/instances/${alice.id}/connect`);
  await page.locator('#qr-image').waitFor({ timeout: 15000 });
  assert.ok(await page.locator('#qr-image').evaluate((img) => img.complete && img.naturalWidth > 0), 'the QR image renders');
  await shot('02-instance-qr');
  await api('POST', `/api/v1/instances/${alice.id}/sandbox/scan`);
  await page.locator('#instance-status[data-status="connected"]').waitFor({ timeout: 15000 });
  await page.getByRole('heading', { name: 'Send a test message' }).waitFor();

  // A message sent through the API appears, and its status follows the receipts up to read.
  let bobAddress;
  for (let i = 0; !bobAddress && i < 100; i++) {
    bobAddress = (await api('GET', `/api/v1/instances/${bob.id}`)).account?.address;
    if (!bobAddress) await new Promise((r) => setTimeout(r, 100));
  }
  const sent = await api('POST', `/api/v1/instances/${alice.id}/messages`, { type: 'text', to: bobAddress, text: 'Live from the API' });
  await page.locator(`tr[id="${sent.id}"]`).waitFor({ timeout: 15000 });
  await page.locator(`tr[id="${sent.id}"].message-read`).waitFor({ timeout: 20000 });
  const history = await page.locator(`tr[id="${sent.id}"] ol.history`).innerText();
  for (const s of ['queued', 'sent', 'delivered', 'read']) assert.match(history, new RegExp(s));
  assert.ok(await samePage(page), 'the instance page reloaded');
  await shot('03-instance-message-read');

  // The delivery log of an endpoint: a link created through the API shows as a delivery, then its outcome.
  const hook = await api('POST', '/api/v1/webhooks', { url: `http://127.0.0.1:${receiver.address().port}/hook`, events: ['link.*'] });
  await page.goto(`${app.sb.url}/user/webhooks/${hook.id}?tz=UTC`);
  await liveOpen(page);
  await markPage(page);
  assert.equal(await page.locator('#deliveries tbody tr').count(), 0);
  await api('POST', '/api/v1/links', { destination_url: 'https://example.com/live-1' });
  await page.locator('#deliveries tbody tr').first().waitFor({ timeout: 15000 });
  await page.locator('#deliveries tbody tr .status-succeeded').first().waitFor({ timeout: 15000 });
  assert.match(await page.locator('#deliveries').innerText(), /link\.created[\s\S]*succeeded/i);
  assert.ok(await samePage(page), 'the webhook page reloaded');
  await shot('04-delivery-log');

  // The event log: a new event appears on top, and an event the reader opened stays open.
  await page.goto(`${app.sb.url}/user/events?tz=UTC`);
  await liveOpen(page);
  await markPage(page);
  const before = await page.locator('#events > li').count();
  await page.locator('#events > li').first().locator('summary').click();
  const opened = await page.locator('#events > li').first().getAttribute('data-event-id');
  const link = await api('POST', '/api/v1/links', { destination_url: 'https://example.com/live-2' });
  await page.waitForFunction((n) => document.querySelectorAll('#events > li').length === n + 1, before, { timeout: 15000 });
  const top = page.locator('#events > li').first();
  assert.equal(await top.locator('.event-type').innerText(), 'link.created');
  assert.match(await top.locator('pre.code').textContent(), new RegExp(link.id));
  assert.ok(await page.locator(`[data-event-id="${opened}"] details`).evaluate((d) => d.open), 'the opened event was closed');
  await page.locator('#events > li').first().locator('.event-deliveries .status-succeeded').waitFor({ timeout: 15000 });
  assert.ok(await samePage(page), 'the event log reloaded');
  await shot('05-event-log');

  assert.deepEqual(errors, []);
  await context.close();
});

test('without script the instance page reloads itself while the instance changes', async () => {
  const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 }, javaScriptEnabled: false });
  const page = await context.newPage();
  await signUpWithWorkspace(page, app.sb.url, 'nojs@example.com', 'Acme no script');
  const ws = app.sb.cli(['workspace', 'list']).find((w) => w.name === 'Acme no script');
  key = app.sb.cli(['key', 'create', '--workspace', ws.id, '--name', 'nojs', '--scopes', 'messaging:write']).secret;
  const carol = await api('POST', '/api/v1/instances', { name: 'Carol', provider: 'sandbox' });
  await api('POST', `/api/v1/instances/${carol.id}/connect`);
  await page.goto(`${app.sb.url}/user/channels/${carol.id}`);
  await page.locator('#qr-image').waitFor({ timeout: 15000 });
  await api('POST', `/api/v1/instances/${carol.id}/sandbox/scan`);
  await page.locator('#instance-status[data-status="connected"]').waitFor({ timeout: 15000 });
  assert.equal(await page.locator('html').getAttribute('data-live'), null);
  await page.screenshot({ path: join(screenshotDir, 'live-06-no-script.png'), fullPage: true });
  await context.close();
});
