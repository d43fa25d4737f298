// Short links in a real browser: create a link with a custom slug and UTM parameters, copy it, open its page, read
// its QR code downloads, and watch the chart and the totals move while visitors click (the page redraws itself).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { screenshotDir, signUpWithWorkspace, withSwitchboard } from './server.mjs';

const app = withSwitchboard();

const chrome = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

test('create a short link, share its QR code, watch its clicks arrive', async () => {
  const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Europe/Berlin', acceptDownloads: true });
  const page = await context.newPage();
  const errors = [];
  // A refused form answers 422, which Chromium reports as a failed load: that is the page working.
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of 422/.test(msg.text())) errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  const shot = (name) => page.screenshot({ path: join(screenshotDir, `links-${name}.png`), fullPage: true });

  await signUpWithWorkspace(page, app.sb.url, 'grace@example.com', 'Acme marketing');
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Short links' }).click();
  await page.waitForURL(/\/user\/links$/);
  await shot('01-empty');

  await page.getByLabel('Destination URL').fill('https://example.com/pricing');
  await page.getByLabel(/^Slug/).fill('spring-sale');
  await page.getByLabel(/^Title/).fill('Spring sale');
  await page.getByLabel(/^Tags/).fill('newsletter, spring');
  await page.getByText('UTM parameters, expiry and click limit').click();
  await page.getByLabel('utm_source').fill('newsletter');
  await page.getByLabel('utm_campaign').fill('spring');
  await page.getByLabel(/^Expires at/).fill('2031-06-01T12:00');
  await page.getByRole('button', { name: 'Create link' }).click();

  const shortEl = page.locator('#new-link-url');
  await shortEl.waitFor();
  const short = (await shortEl.innerText()).trim();
  assert.equal(short, `${app.sb.url}/spring-sale`);
  await shot('02-created');

  // A wrong slug is refused beside the field, the rest of the form kept.
  await page.getByLabel('Destination URL').fill('https://example.com/again');
  await page.getByLabel(/^Slug/).fill('spring-sale');
  await page.getByRole('button', { name: 'Create link' }).click();
  await page.getByRole('alert').filter({ hasText: 'not saved' }).waitFor();
  assert.match(await page.locator('.field-error').first().innerText(), /taken/);
  assert.equal(await page.getByLabel('Destination URL').inputValue(), 'https://example.com/again');
  await shot('03-refused');

  // The link as the API sees it: the expiry was typed in Berlin (CEST, UTC+2).
  const res = await fetch(`${app.sb.url}/spring-sale+`);
  assert.equal(res.status, 200);
  const redirect = await fetch(`${app.sb.url}/spring-sale`, { redirect: 'manual', headers: { 'User-Agent': chrome } });
  assert.equal(redirect.status, 302);
  assert.equal(redirect.headers.get('location'), 'https://example.com/pricing?utm_campaign=spring&utm_source=newsletter');

  await page.goto(`${app.sb.url}/user/links`);
  await page.getByRole('link', { name: short, exact: true }).click();
  await page.waitForURL(/\/user\/links\/lnk_[^?]+\?tz=Europe%2FBerlin/);
  assert.match(await page.locator('main').innerText(), /Times in Europe\/Berlin/);
  assert.match(await page.locator('main').innerText(), /1 Jun 2031 12:00 CEST/);
  assert.equal(await page.locator('time[datetime="2031-06-01T10:00:00Z"]').count(), 1, 'stored as 10:00 UTC');
  assert.equal(await page.locator('#total-humans').innerText(), '1');

  // QR codes: the SVG is shown, PNG and SVG download.
  const qr = page.getByRole('img', { name: `QR code of ${short}` });
  await qr.waitFor();
  assert.ok(await qr.evaluate((img) => img.complete && img.naturalWidth > 0), 'the QR code image loads');
  for (const [label, type] of [['Download PNG', /\.png$/], ['Download SVG', /\.svg$/]]) {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: label }).click()]);
    assert.match(download.suggestedFilename(), type);
    assert.equal(download.suggestedFilename().startsWith('qr-spring-sale.'), true);
  }

  // Visitors click; the page redraws its statistics by itself.
  for (let i = 0; i < 4; i++) {
    await fetch(`${app.sb.url}/spring-sale`, { redirect: 'manual', headers: { 'User-Agent': chrome, Referer: 'https://news.example.org/post' } });
  }
  await fetch(`${app.sb.url}/spring-sale`, { redirect: 'manual', headers: { 'User-Agent': 'Googlebot/2.1 (+http://www.google.com/bot.html)' } });
  await page.locator('#total-humans').filter({ hasText: /^5$/ }).waitFor({ timeout: 15000 });
  await page.locator('#total-bots').filter({ hasText: /^1$/ }).waitFor({ timeout: 15000 });
  assert.match(await page.locator('#link-stats').innerText(), /news\.example\.org/);
  await page.getByLabel('Show').selectOption('hour');
  await page.waitForURL(/interval=hour/);
  await page.locator('.chart .bar-lower').first().waitFor();
  await shot('04-link-page');

  // Edit, then delete with confirmation.
  await page.getByRole('link', { name: 'Edit' }).click();
  await page.getByLabel(/^Title/).fill('Spring sale (extended)');
  await page.getByRole('button', { name: 'Save link' }).click();
  await page.getByRole('status').filter({ hasText: 'saved' }).waitFor();
  assert.match(await page.locator('main').innerText(), /Spring sale \(extended\)/);
  assert.match(await page.locator('main').innerText(), /1 Jun 2031 12:00 CEST/, 'an unchanged expiry stays as it was');
  await page.getByRole('link', { name: 'Delete' }).click();
  await shot('05-delete-confirm');
  await page.getByRole('button', { name: `Delete ${short}` }).click();
  await page.getByRole('status').filter({ hasText: 'deleted' }).waitFor();
  assert.equal((await fetch(`${app.sb.url}/spring-sale`, { redirect: 'manual' })).status, 404);
  assert.deepEqual(errors, [], 'no script errors and no CSP violations');
  await context.close();
});
