// A key's allowed origins in a real browser: create a browser key for one origin, open its Origins page, change the
// origins and see them listed; clearing every origin of a browser key is refused with a readable reason.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { screenshotDir, signUpWithWorkspace, withSwitchboard } from './server.mjs';

const app = withSwitchboard();

test('edit the allowed origins of a browser key', async () => {
  const page = await app.browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  // A refused form answers 422, which Chromium reports as a failed load: that is the page working.
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of 422/.test(msg.text())) errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  const shot = (name) => page.screenshot({ path: join(screenshotDir, `keyorigins-${name}.png`), fullPage: true });

  await signUpWithWorkspace(page, app.sb.url, 'hedy@example.com', 'Acme site');
  await page.getByLabel('Key name').fill('Share button');
  await page.getByRole('radio', { name: /Browser key/ }).check();
  await page.locator('#key-origins').fill('https://www.acme.example');
  await page.getByRole('button', { name: 'Create key' }).click();
  const secret = (await page.locator('#new-key-secret').innerText()).trim();
  assert.match(secret, /^sb_pk_/);
  await shot('01-created');

  await page.getByRole('link', { name: 'Edit the origins of Share button' }).click();
  await page.waitForURL(/\/user\/api\/keys\/[^/]+\/origins$/);
  assert.equal(await page.getByLabel('Allowed origins').inputValue(), 'https://www.acme.example');
  await shot('02-origins-page');

  await page.getByLabel('Allowed origins').fill('https://shop.acme.example\nhttps://*.acme.example');
  await page.getByRole('button', { name: 'Save origins' }).click();
  await page.waitForURL(/\/user\/api\?origins=/);
  await page.getByRole('status').filter({ hasText: 'now works from: https://shop.acme.example, https://*.acme.example' }).waitFor();
  await shot('03-saved');

  // The change applies to the key's next request: the new origin is served, the old one refused.
  const me = (origin) => fetch(`${app.sb.url}/api/v1/me`, { headers: { Authorization: `Bearer ${secret}`, Origin: origin } });
  assert.equal((await me('https://shop.acme.example')).status, 200);
  assert.equal((await me('https://www.acme.example')).status, 200, 'matches https://*.acme.example');
  assert.equal((await me('https://acme.example')).status, 403);

  // A browser key keeps an origin: clearing them all is refused, readably, and nothing changes.
  await page.getByRole('link', { name: 'Edit the origins of Share button' }).click();
  assert.equal(await page.getByLabel('Allowed origins').inputValue(), 'https://shop.acme.example\nhttps://*.acme.example');
  await page.getByLabel('Allowed origins').fill('');
  await page.getByRole('button', { name: 'Save origins' }).click();
  await page.getByRole('alert').filter({ hasText: 'A browser key keeps at least one origin' }).waitFor();
  await shot('04-origins-required');
  assert.equal((await me('https://shop.acme.example')).status, 200, 'the refused change changed nothing');
  assert.deepEqual(errors, [], 'no script errors and no CSP violations');
});
