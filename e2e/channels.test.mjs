// Channels in a real browser: create two sandbox instances from the provider's config form, connect one and see its
// QR code, simulate the scan, send a message to the other and watch its status history reach "read" as the page
// follows it; change the account's profile (name, about text, a picture uploaded from the page) and put a new label
// on the chat; then disconnect and delete with the confirmation step.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { screenshotDir, signUpWithWorkspace, withSwitchboard } from './server.mjs';

// Receipts on the sandbox's own schedule (0.5 s, 2 s): the page must follow them.
const app = withSwitchboard(['--send-rate', '0']);

// An 8×8 PNG, the picture the profile form uploads.
const picture = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAL0lEQVR4nGL5f0WTgYHBJWUhAwPDnjnxcDYTAw7A6GxxCk0thI1bBx3sAAQAAP//Bi8Ykk/MS+kAAAAASUVORK5CYII=', 'base64');

test('create, pair by QR, send and watch the status, delete', async () => {
  const context = await app.browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of 4\d\d/.test(msg.text())) errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  const shot = (name) => page.screenshot({ path: join(screenshotDir, `channels-${name}.png`), fullPage: true });

  await signUpWithWorkspace(page, app.sb.url, 'cy@example.com', 'Acme messaging');
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Channels' }).click();
  await page.waitForURL(/\/user\/channels$/);
  await shot('01-empty');

  // The second instance pairs by itself (the sandbox's auto_pair setting, a checkbox of its config form).
  const create = async (name, autoPair) => {
    await page.goto(`${app.sb.url}/user/channels`);
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByRole('radio', { name: /Sandbox/ }).check();
    await page.getByRole('textbox', { name: 'display_name', exact: true }).fill(`${name} Co`);
    if (autoPair) await page.getByRole('checkbox', { name: 'auto_pair' }).check();
    await page.getByRole('button', { name: 'Create instance' }).click();
    await page.waitForURL(/\/user\/channels\/ins_/);
    return page.url().split('/').pop();
  };
  const bob = await create('Bob', true);
  await page.getByRole('button', { name: 'Connect' }).click();
  await page.locator('#instance-status[data-status="connected"]').waitFor({ timeout: 15000 });
  const bobAddress = (await page.getByText(/Connected as/).innerText()).match(/\+999\d+/)[0];

  const alice = await create('Alice', false);
  await page.getByRole('button', { name: 'Connect' }).click();
  const qr = page.locator('#qr-image');
  await qr.waitFor({ timeout: 15000 });
  assert.ok((await qr.getAttribute('src')).startsWith('data:image/png;base64,'));
  assert.ok(await qr.evaluate((img) => img.complete && img.naturalWidth > 0), 'the QR image renders');
  await shot('02-qr');
  await page.getByRole('button', { name: 'Simulate the scan' }).click();
  await page.locator('#instance-status[data-status="connected"]').waitFor({ timeout: 15000 });

  await page.getByLabel('To', { exact: true }).fill(bobAddress);
  await page.getByLabel('Text', { exact: true }).fill('Your order has shipped');
  await page.getByRole('button', { name: 'Send' }).click();
  await page.getByRole('status').waitFor();
  // The page reloads itself every two seconds until the message was read.
  await page.locator('tr.message-read').waitFor({ timeout: 20000 });
  const history = await page.locator('tr.message-read ol.history').innerText();
  for (const s of ['queued', 'sending', 'sent', 'delivered', 'read']) assert.match(history, new RegExp(s));
  await shot('03-read');

  // The account's profile: read from the network, changed by its form with a picture uploaded from the page.
  const profile = page.locator('#profile-form');
  assert.equal(await page.locator('#profile-name').innerText(), 'Alice Co');
  await profile.getByLabel('Name', { exact: true }).fill('Alice Support');
  await profile.getByLabel('About', { exact: true }).fill('We answer within the hour');
  await profile.getByLabel('New picture').setInputFiles({ name: 'alice.png', mimeType: 'image/png', buffer: picture });
  await profile.getByRole('button', { name: 'Save profile' }).click();
  await page.waitForURL(/done=profile/);
  assert.equal(await page.locator('#profile-name').innerText(), 'Alice Support');
  assert.equal(await page.locator('#profile-about').innerText(), 'We answer within the hour');
  const thumb = page.locator('img#profile-picture');
  assert.match(await thumb.getAttribute('src'), /^\/user\/media\/med_/);
  assert.ok(await thumb.evaluate((img) => img.decode().then(() => img.naturalWidth === 8)), 'the uploaded picture shows');
  await shot('03-profile');

  // A label, created with a color, then put on the chat with Bob from the chat list.
  await page.getByLabel('New label', { exact: true }).fill('Follow up');
  await page.getByLabel('Color of the new label').selectOption({ label: 'teal' });
  await page.getByRole('button', { name: 'Create label' }).click();
  await page.waitForURL(/done=label-created/);
  assert.equal(await page.locator('#label-list [data-label]').innerText(), 'Follow up');
  const chat = page.locator('#chats tr', { hasText: bobAddress });
  await chat.getByLabel('Label to put on the chat').selectOption({ label: 'Follow up' });
  await chat.getByRole('button', { name: 'Label', exact: true }).click();
  await page.waitForURL(/done=chat-labelled/);
  const chip = page.locator('#chats tr', { hasText: bobAddress }).locator('[data-chat-label]');
  assert.match(await chip.innerText(), /Follow up/);
  assert.match(await chip.getAttribute('class'), /label-color-5/);
  await shot('03-labelled-chat');

  // Bob's page shows the message received.
  await page.goto(`${app.sb.url}/user/channels/${bob}`);
  assert.match(await page.locator('#messages').innerText(), /inbound[\s\S]*Your order has shipped[\s\S]*received/);

  await page.goto(`${app.sb.url}/user/channels`);
  assert.match(await page.locator('#instances').innerText(), /Alice[\s\S]*connected/);
  await shot('04-list');

  // Alice's contact for Bob links to his person: one person, with the channels that reach him.
  await page.goto(`${app.sb.url}/user/channels/${alice}`);
  await page.locator('#contacts tr', { hasText: bobAddress }).getByRole('link', { name: /^per_/ }).click();
  await page.waitForURL(/\/user\/people\/per_/);
  assert.match(await page.locator('#person-channels').innerText(), /Alice[\s\S]*sandbox/);
  assert.match(await page.locator('#person-addresses').innerText(), new RegExp(bobAddress.replace('+', '\\+')));
  await shot('04-person');
  // Send to the person with failover: the route completes on its first channel, and the page shows it.
  await page.getByLabel('Message', { exact: true }).fill('Your parcel is at the door');
  await page.getByRole('button', { name: 'Send' }).click();
  await page.getByRole('status').waitFor();
  await page.locator('#routes tr[data-route-status="completed"]').waitFor({ timeout: 20000 });
  assert.match(await page.locator('#routes').innerText(), /Your parcel is at the door[\s\S]*completed[\s\S]*succeeded/);
  await shot('04-person-route');
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'People' }).click();
  await page.waitForURL(/\/user\/people$/);
  assert.match(await page.locator('#people').innerText(), /Alice/);

  await page.goto(`${app.sb.url}/user/channels/${alice}`);
  await page.getByRole('button', { name: 'Disconnect' }).click();
  await page.locator('#instance-status[data-status="disconnected"]').waitFor();
  await page.getByRole('link', { name: 'Delete' }).click();
  await page.getByLabel(/Type Alice to confirm/).fill('Alice');
  await shot('05-delete');
  await page.getByRole('button', { name: 'Delete instance' }).click();
  await page.waitForURL(/\/user\/channels\?done=deleted/);
  assert.doesNotMatch(await page.locator('main').innerText(), /Alice/);
  assert.deepEqual(errors, []);
  await context.close();
});

// A network that pushes (WhatsApp Cloud): its secrets are password fields, never shown again, and the instance's page
// shows the hook URL to enter in Meta's dashboard.
test('create a WhatsApp Cloud instance and find its hook URL', async () => {
  const context = await app.browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  await signUpWithWorkspace(page, app.sb.url, 'wa@example.com', 'Acme WhatsApp');
  await page.goto(`${app.sb.url}/user/channels`);
  await page.getByLabel('Name', { exact: true }).fill('Support line');
  // Only the chosen provider's settings show (a static script; the console allows no inline one).
  const shownSettings = () => page.locator('fieldset.provider-config:visible').evaluateAll((sets) => sets.map((f) => f.id));
  await page.getByRole('radio', { name: /Sandbox/ }).check();
  assert.deepEqual(await shownSettings(), ['config-sandbox']);
  await page.getByRole('radio', { name: /WhatsApp Business/ }).check();
  assert.deepEqual(await shownSettings(), ['config-whatsapp_cloud']);
  await page.screenshot({ path: join(screenshotDir, 'channels-06-provider-settings.png'), fullPage: true });
  const field = (name) => page.locator(`#config-whatsapp_cloud-${name}`);
  await field('phone_number_id').fill('106540352242922');
  for (const [name, value] of [['access_token', 'EAAJ-a-system-user-token-0123456789'], ['app_secret', 'app-secret-0123456789'],
    ['verify_token', 'verify-me-please']]) {
    assert.equal(await field(name).getAttribute('type'), 'password');
    await field(name).fill(value);
  }
  await page.getByRole('button', { name: 'Create instance' }).click();
  await page.waitForURL(/\/user\/channels\/ins_/);
  const id = page.url().split('/').pop();
  assert.equal(await page.locator('#hook-url').innerText(), `${app.sb.url}/hooks/channels/${id}`);
  const text = await page.locator('main').innerText();
  for (const secret of ['EAAJ-a-system-user-token', 'app-secret-0123456789', 'verify-me-please']) {
    assert.ok(!text.includes(secret), `the page shows ${secret}`);
  }
  await page.screenshot({ path: join(screenshotDir, 'channels-06-whatsapp-hook.png'), fullPage: true });
  // Meta's URL check is answered by the verify token.
  const check = await fetch(`${app.sb.url}/hooks/channels/${id}?hub.mode=subscribe&hub.verify_token=verify-me-please&hub.challenge=4242`);
  assert.equal(await check.text(), '4242');
  await context.close();
});
