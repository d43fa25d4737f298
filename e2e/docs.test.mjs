// The interactive reference: paste a key into Authorize, execute GET /api/v1/models, get 200 and a cURL command.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { screenshotDir, withSwitchboard } from './server.mjs';

const app = withSwitchboard();

test('a pasted key runs the first call from /docs and shows its cURL command', async () => {
  const ws = app.sb.cli(['workspace', 'create', '--name', 'Docs test']);
  const key = app.sb.cli(['key', 'create', '--workspace', ws.id, '--name', 'docs', '--scopes', 'models:read']);

  const page = await app.browser.newPage({ viewport: { width: 1300, height: 1400 } });
  // The page runs under a Content-Security-Policy: anything it refuses (a script, a style, a call) is a failure.
  const refused = [];
  page.on('console', (msg) => { if (/Content Security Policy/i.test(msg.text())) refused.push(msg.text()); });
  page.on('pageerror', (err) => refused.push(err.message));
  const res = await page.goto(`${app.sb.url}/docs/`);
  assert.match(res.headers()['content-security-policy'], /frame-ancestors 'none'/);
  await page.getByRole('button', { name: 'Authorize' }).first().click();
  // The API key goes into the bearer scheme (the other one is the event stream's short-lived token).
  const bearer = page.locator('.modal-ux .auth-container').filter({ has: page.locator('#auth-bearer-value') });
  await bearer.locator('#auth-bearer-value').fill(key.secret);
  await bearer.locator('button.authorize').click();
  await page.locator('.modal-ux button.btn-done').first().click();

  const op = page.locator('#operations-Models-listModels');
  await op.click();
  await op.getByRole('button', { name: 'Execute' }).click();
  const status = op.locator('.live-responses-table .response .response-col_status').first();
  await status.waitFor();
  assert.equal((await status.innerText()).trim(), '200');

  const curl = await op.locator('.curl-command').first().innerText();
  assert.match(curl, /curl -X 'GET'/);
  assert.match(curl, new RegExp(`${app.sb.url}/api/v1/models`));
  assert.match(curl, new RegExp(`Authorization: Bearer ${key.secret}`));
  await op.screenshot({ path: join(screenshotDir, 'docs-list-models.png') });
  assert.ok(!app.sb.logs().includes(key.secret), 'the server must never log a key');
  assert.deepEqual(refused, [], 'the page broke its Content-Security-Policy');
});
