// Sources in a real browser: create a GitHub source, copy its ingest URL (shown once), send it a signed request and
// a forged one, read both in the request log with their outcome and reason, replay the accepted event, and add a
// custom event type.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { screenshotDir, signUpWithWorkspace, withSwitchboard } from './server.mjs';

const app = withSwitchboard();

test('create a source, see signed and forged requests in its log, replay an event', async () => {
  const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.sb.url });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of 422/.test(msg.text())) errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  const shot = (name) => page.screenshot({ path: join(screenshotDir, `sources-${name}.png`), fullPage: true });

  await signUpWithWorkspace(page, app.sb.url, 'ada@example.com', 'Acme automation');
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Sources' }).click();
  await page.waitForURL(/\/user\/sources$/);

  // A scheme without its secret is refused beside the field.
  await page.getByLabel('Name', { exact: true }).fill('GitHub pushes');
  await page.getByLabel('Event type', { exact: true }).fill('custom.github.push');
  await page.getByLabel('Verification', { exact: true }).selectOption('github');
  await page.getByRole('button', { name: 'Create source' }).click();
  await page.getByRole('alert').waitFor();
  assert.match(await page.getByText('is required for the github scheme').innerText(), /required/);

  await page.getByLabel('Name', { exact: true }).fill('GitHub pushes');
  await page.getByLabel('Event type', { exact: true }).fill('custom.github.push');
  await page.getByLabel('Verification', { exact: true }).selectOption('github');
  await page.getByLabel('Secret', { exact: true }).fill('gh-secret');
  await page.getByRole('button', { name: 'Create source' }).click();
  const urlEl = page.locator('#new-source-url');
  await urlEl.waitFor();
  const ingestURL = (await urlEl.innerText()).trim();
  assert.match(ingestURL, new RegExp(`^${app.sb.url}/in/in_[A-Za-z0-9_-]{40}$`));
  await page.getByRole('button', { name: 'Copy' }).click();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), ingestURL);
  await shot('01-created');

  const body = JSON.stringify({ ref: 'refs/heads/main', commits: [{ id: 'c1' }] });
  const sign = (secret) => 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');
  const send = (signature) => fetch(ingestURL, { method: 'POST', body,
    headers: { 'Content-Type': 'application/json', 'X-Hub-Signature-256': signature } });
  const ok = await send(sign('gh-secret'));
  assert.equal(ok.status, 200);
  const { event_id: eventID } = await ok.json();
  const forged = await send(sign('guess'));
  assert.equal(forged.status, 401);
  assert.equal((await forged.json()).code, 'signature_invalid');

  // The token is shown once: the list shows only its last characters.
  await page.goto(`${app.sb.url}/user/sources`);
  assert.equal(await page.locator('#new-source-url').count(), 0);
  assert.ok(!(await page.content()).includes(ingestURL));
  await page.getByRole('link', { name: 'GitHub pushes' }).click();
  const rows = page.locator('tbody tr');
  await rows.first().waitFor();
  assert.equal(await rows.count(), 2);
  assert.match(await rows.nth(0).innerText(), /refused\s+401\s+invalid_signature/);
  assert.match(await rows.nth(1).innerText(), new RegExp(`accepted\\s+200[\\s\\S]*${eventID}`));
  await rows.nth(0).locator('summary').click();
  assert.match(await rows.nth(0).innerText(), /X-Hub-Signature-256\s*\[redacted\]/);
  await shot('02-request-log');

  await page.getByRole('button', { name: `Replay ${eventID}` }).click();
  await page.getByRole('status').waitFor();
  assert.match(await page.getByRole('status').innerText(), /Replayed to the subscribers as evt_/);

  await page.goto(`${app.sb.url}/user/sources`);
  await page.getByLabel('Type name').fill('custom.order.paid');
  await page.getByLabel('Description').fill('An order was paid.');
  await page.getByLabel('JSON Schema of the data').fill('{"type":"object","required":["order_id"]}');
  await page.getByLabel('Example data').fill('{"order_id":"o1"}');
  await page.getByRole('button', { name: 'Create event type' }).click();
  await page.getByRole('status').waitFor();
  await page.getByRole('button', { name: 'Archive custom.order.paid' }).click();
  await page.getByRole('button', { name: 'Restore custom.order.paid' }).waitFor();
  await shot('03-event-types');
  assert.deepEqual(errors, []);
  await context.close();
});
