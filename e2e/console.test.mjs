// The onboarding flow in a real browser: sign up, create a workspace, create a key with only models:read, copy its
// secret from the page, call the API with it (200; 403 outside its scope), revoke it in the console (401 after).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { screenshotDir, withSwitchboard } from './server.mjs';

const app = withSwitchboard();

async function api(path, key) {
  const res = await fetch(`${app.sb.url}${path}`, { headers: { Authorization: `Bearer ${key}`, Accept: 'application/json' } });
  return { status: res.status, body: await res.json() };
}

test('sign up, create a workspace and a models:read key, call the API, revoke', async () => {
  const page = await app.browser.newPage({ viewport: { width: 1280, height: 900 } });
  const shot = (name) => page.screenshot({ path: join(screenshotDir, `console-${name}.png`), fullPage: true });

  await page.goto(`${app.sb.url}/user/api`);
  await page.waitForURL(/\/user\/sign-in/);
  await page.getByRole('link', { name: 'Create an account' }).click();
  await shot('01-sign-up');
  await page.getByLabel('Email').fill('ada@example.com');
  await page.getByLabel('Password').fill('correct horse battery staple');
  await page.getByRole('button', { name: 'Sign up' }).click();

  await page.waitForURL(/\/user\/workspaces/);
  await shot('02-workspaces-empty');
  await page.getByLabel('Workspace name').fill('Acme production');
  await page.getByRole('button', { name: 'Create workspace' }).click();

  await page.waitForURL(/\/user\/api/);
  await shot('03-api-empty');
  await page.getByLabel('Key name').fill('Models reader');
  await page.getByRole('radio', { name: /Custom/ }).check();
  await page.getByRole('radio', { name: 'models: read' }).check();
  await page.getByLabel('Expires').selectOption('30d');
  await page.getByRole('button', { name: 'Create key' }).click();

  const secretEl = page.locator('#new-key-secret');
  await secretEl.waitFor();
  const secret = (await secretEl.innerText()).trim();
  assert.match(secret, /^sb_sk_[0-9A-Za-z]{38}$/);
  assert.match(await page.locator('#new-key').innerText(), /will not be shown again/);
  assert.match(await page.locator('#new-key-curl').innerText(), new RegExp(`Bearer ${secret}.*/api/v1/models`));
  // The cURL builder picked up the new key and builds the first call.
  await page.locator('#curl-command').filter({ hasText: secret }).waitFor();
  assert.match(await page.locator('#curl-command').innerText(), /\/api\/v1\/models/);
  await shot('04-key-created');

  const ok = await api('/api/v1/models', secret);
  assert.equal(ok.status, 200);
  assert.equal(ok.body.object, 'list');

  // Outside its scope: the console's models:read key on the links API, and a links:read key on the models.
  const noLinks = await api('/api/v1/links', secret);
  assert.equal(noLinks.status, 403);
  assert.equal(noLinks.body.code, 'insufficient_scope');
  assert.deepEqual(noLinks.body.required_scopes, ['links:read']);
  const other = app.sb.cli(['key', 'create', '--workspace', (app.sb.cli(['workspace', 'list']))[0].id, '--name', 'links only', '--scopes', 'links:read']);
  const forbidden = await api('/api/v1/models', other.secret);
  assert.equal(forbidden.status, 403);
  assert.equal(forbidden.body.code, 'insufficient_scope');
  const links = await api('/api/v1/links', other.secret);
  assert.equal(links.status, 200);
  assert.equal(links.body.object, 'list');

  // The builder sends the request from the page.
  await page.getByRole('button', { name: 'Send request' }).click();
  await page.locator('#curl-response').filter({ hasText: 'HTTP 200' }).waitFor();

  await page.goto(`${app.sb.url}/user/api`);
  assert.equal(await page.locator('#new-key-secret').count(), 0, 'the secret is shown only once');
  const row = page.locator('tr', { hasText: 'Models reader' });
  assert.match(await row.innerText(), /just now/, 'last used shows the call just made');
  await shot('05-key-list');
  await row.getByRole('link', { name: 'Revoke Models reader' }).click();
  await page.waitForURL(/\/revoke$/);
  await shot('06-revoke-confirm');
  await page.getByRole('button', { name: 'Revoke key Models reader' }).click();
  await page.waitForURL(/\/user\/api\?revoked=/);
  await page.getByRole('status').filter({ hasText: 'was revoked' }).waitFor();
  await shot('07-revoked');

  const revoked = await api('/api/v1/models', secret);
  assert.equal(revoked.status, 401);
  assert.equal(revoked.body.code, 'api_key_revoked');
  assert.ok(!app.sb.logs().includes(secret), 'the server must never log a key');
});
