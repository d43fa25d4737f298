// Webhooks in a real browser: add an endpoint for link events, keep its secret, send a test event, watch a real
// delivery fail in the delivery log with the receiver's answer, fix the receiver and resend with one click; edit an
// endpoint after its creation.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { join } from 'node:path';
import { screenshotDir, signUpWithWorkspace, withSwitchboard } from './server.mjs';

const app = withSwitchboard(['--webhook-allow-http', '--webhook-allowed-networks', '127.0.0.0/8',
    '--webhook-retry-schedule', '0s,1h']);

let receiver;
// The receiver's bug: until it is fixed it refuses every delivery.
const rx = { fixed: false, received: [] };

before(async () => {
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      rx.received.push({ url: req.url, headers: req.headers, body });
      res.setHeader('Content-Type', 'application/json');
      res.setHeader('X-Receiver-Version', rx.fixed ? '2' : '1');
      if (rx.fixed) {
        res.writeHead(200).end('{"received":true}');
      } else {
        res.writeHead(400).end('{"error":"unknown field short_url in data.link"}');
      }
    });
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  // A retry an hour later: the test fixes the receiver and resends by hand.
});

after(async () => {
  receiver?.close();
});

test('a delivery the receiver rejected is found in the log and resent after the fix', async () => {
  const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'America/New_York' });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of 4\d\d/.test(msg.text())) errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  const shot = (name) => page.screenshot({ path: join(screenshotDir, `webhooks-${name}.png`), fullPage: true });
  const hookURL = `http://127.0.0.1:${receiver.address().port}/switchboard`;

  await signUpWithWorkspace(page, app.sb.url, 'ops@example.com', 'Acme ops');
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Webhooks' }).click();
  await page.waitForURL(/\/user\/webhooks$/);
  await page.getByLabel('Endpoint URL').fill(hookURL);
  await page.getByLabel(/^Description/).fill('Order service');
  await page.getByRole('checkbox', { name: /Every link event/ }).check();
  await page.locator('li').filter({ has: page.locator('input[value="link.created"]') }).locator('summary').click();
  await shot('01-create');
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  const secret = (await page.locator('#webhook-secret').innerText()).trim();
  assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.match(await page.locator('#webhook-verify').innerText(), new RegExp(`Webhook\\("${secret.replace(/[+/]/g, '\\$&')}"\\)`));
  await shot('02-secret');

  await page.getByRole('link', { name: 'Open the endpoint' }).click();
  await page.waitForURL(/\/user\/webhooks\/whk_[^?]+\?tz=America%2FNew_York/);
  await page.getByRole('button', { name: 'Send test event' }).click();
  const result = page.locator('#test-result');
  await result.waitFor();
  assert.match(await result.innerText(), /Failed: HTTP 400/);
  assert.match(await result.innerText(), /unknown field short_url/);
  assert.equal(rx.received.length, 1);
  assert.match(rx.received[0].headers['webhook-signature'], /^v1,/);

  // A real event: a short link made in the console.
  await page.goto(`${app.sb.url}/user/links`);
  await page.getByLabel('Destination URL').fill('https://example.com/launch');
  await page.getByLabel(/^Slug/).fill('launch');
  await page.getByRole('button', { name: 'Create link' }).click();
  await page.locator('#new-link-url').waitFor();
  for (let i = 0; rx.received.length < 2; i++) {
    assert.ok(i < 100, 'the link.created delivery reaches the receiver');
    await new Promise((r) => setTimeout(r, 100));
  }

  await page.goto(`${app.sb.url}/user/webhooks`);
  await page.getByRole('link', { name: hookURL }).click();
  await page.waitForURL(/tz=/);
  const row = page.locator('#deliveries tbody tr').first();
  await row.filter({ hasText: 'link.created' }).waitFor();
  assert.match(await row.innerText(), /HTTP 400/);
  assert.match(await page.locator('#success-rate').innerText(), /^0 %$/);
  await shot('03-endpoint');
  await page.getByLabel('Status').selectOption('pending');
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.waitForURL(/status=pending/);
  await row.getByRole('link').click();
  await page.waitForURL(/\/deliveries\/dlv_/);
  const latest = page.locator('article.attempt').first();
  assert.match(await latest.innerText(), /HTTP 400/);
  assert.match(await latest.innerText(), /unknown field short_url in data\.link/);
  assert.match(await latest.innerText(), /X-Receiver-Version/);
  const request = await latest.locator('pre[id^="request-"]').innerText();
  assert.match(request, new RegExp(`^POST ${hookURL}\\n`));
  assert.match(request, /webhook-signature: v1,/);
  const sent = rx.received[1];
  assert.ok(request.includes(`webhook-signature: ${sent.headers['webhook-signature']}`), 'the exact signature sent');
  assert.ok(request.endsWith(sent.body), 'the exact body sent');
  await shot('04-delivery-failed');

  // The fix, then one click.
  rx.fixed = true;
  await page.getByRole('button', { name: 'Resend now' }).click();
  await page.getByRole('status').filter({ hasText: 'queued again' }).waitFor();
  for (let i = 0; ; i++) {
    assert.ok(i < 50, `the resent delivery succeeds (receiver got ${rx.received.length}, status ${await page.locator('#delivery-status').innerText()})`);
    await page.reload();
    if ((await page.locator('#delivery-status').textContent()).trim() === 'succeeded') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.match(await page.locator('article.attempt').first().innerText(), /HTTP 200/);
  assert.equal(rx.received[2].headers['webhook-id'], rx.received[1].headers['webhook-id'], 'the same webhook-id');
  await shot('05-delivery-resent');

  // Rotate the secret: the new one is shown once, the old one keeps signing for a day.
  await page.getByRole('link', { name: hookURL }).click();
  await page.getByRole('button', { name: 'Rotate secret' }).click();
  const rotated = (await page.locator('#webhook-secret').innerText()).trim();
  assert.notEqual(rotated, secret);
  assert.match(await page.locator('#rotated').innerText(), /previous secret keeps signing/);
  await page.getByRole('button', { name: 'Pause' }).click();
  await page.getByRole('status').filter({ hasText: 'paused' }).waitFor();
  await page.getByRole('button', { name: 'Resume' }).click();
  await page.getByRole('status').filter({ hasText: 'active again' }).waitFor();
  assert.match(await page.locator('main').innerText(), /times in America\/New_York/, 'actions keep the browser\'s zone');
  await shot('06-endpoint-after');

  // The event log: the link's event, its JSON, and the endpoint it went to.
  await page.goto(`${app.sb.url}/user/webhooks`);
  await page.getByRole('link', { name: 'Event log' }).click();
  await page.waitForURL(/\/user\/events\?tz=America%2FNew_York/);
  const event = page.locator('li.event').filter({ hasText: 'link.created' });
  await event.locator('summary').click();
  assert.match(await event.innerText(), /"destination_url": "https:\/\/example.com\/launch"/);
  assert.match(await event.innerText(), /succeeded/i);
  await shot('07-event-log');
  await page.getByLabel('Event type').selectOption('webhook.ping');
  await page.waitForURL(/type=webhook.ping/);
  assert.match(await page.locator('main').innerText(), /No events of this type yet/, 'test events are not stored');
  await event.page().goto(`${app.sb.url}/user/events`);
  await page.locator('li.event').filter({ hasText: 'link.created' }).locator('summary').click();
  await page.getByRole('link', { name: hookURL }).click();
  await page.waitForURL(/\/deliveries\/dlv_/);
  assert.ok(!app.sb.logs().includes(secret) && !app.sb.logs().includes(rotated), 'the server never logs a signing secret');
  assert.deepEqual(errors, [], 'no script errors and no CSP violations');
  await context.close();
});

test('an endpoint is edited after creation, and its empty chart speaks of deliveries', async () => {
  const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of 4\d\d/.test(msg.text())) errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  const shot = (name) => page.screenshot({ path: join(screenshotDir, `webhooks-${name}.png`), fullPage: true });
  const base = `http://127.0.0.1:${receiver.address().port}`;

  await signUpWithWorkspace(page, app.sb.url, 'edit@example.com', 'Acme edits');
  await page.goto(`${app.sb.url}/user/webhooks`);
  await page.getByLabel('Endpoint URL').fill(`${base}/first`);
  await page.getByRole('checkbox', { name: /Every link event/ }).check();
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  await page.getByRole('link', { name: 'Open the endpoint' }).click();
  const chart = page.locator('svg.chart');
  assert.match(await chart.innerHTML(), /No delivery attempts in the last day/);
  assert.doesNotMatch(await chart.innerHTML(), /clicks/);
  await shot('08-empty-chart');

  await page.getByRole('link', { name: 'Edit' }).click();
  await page.waitForURL(/\/edit$/);
  assert.equal(await page.getByLabel('Endpoint URL').inputValue(), `${base}/first`);
  await page.getByLabel('Endpoint URL').fill(`${base}/moved`);
  await page.getByRole('checkbox', { name: /Every webhook event/ }).check();
  await page.locator('details.more-options summary').click();
  await page.getByLabel(/^Filters/).fill('[{"pointer": "/link_id", "op": "exists"}]');
  await page.getByLabel(/^Headers/).fill('X-Token: edited-value');
  await page.getByLabel(/^Rate limit/).fill('3');
  await shot('09-edit');
  await page.getByRole('button', { name: 'Save endpoint' }).click();
  await page.getByRole('status').filter({ hasText: 'The endpoint was saved' }).waitFor();
  const head = await page.locator('.page-head').innerText();
  assert.match(head, new RegExp(`${base}/moved`));
  assert.match(head, /webhook\.\*/);
  assert.match(head, /header X-Token/);
  assert.match(head, /3\/s/);
  await shot('10-edited');

  // Deliveries follow the saved endpoint: the test event goes to the new URL with the new header.
  const before = rx.received.length;
  await page.getByRole('button', { name: 'Send test event' }).click();
  await page.locator('#test-result').waitFor();
  const got = rx.received[before];
  assert.equal(got.url, '/moved');
  assert.equal(got.headers['x-token'], 'edited-value');
  assert.ok(!(await page.locator('main').innerText()).includes('edited-value'), 'a header value is never shown');
  assert.deepEqual(errors, [], 'no script errors and no CSP violations');
  await context.close();
});
