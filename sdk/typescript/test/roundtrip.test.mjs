// A round trip through the built SDK against a running server: `make test-sdk` starts one on a fresh SQLite
// database, makes a workspace key with the CLI and sets SWITCHBOARD_URL and SWITCHBOARD_API_KEY.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  switchboard, listModels, createLink, getLink, createWebhook, createInstance, connectInstance, sendMessage, getMessage,
  getInstance,
} from '../dist/index.js';

const baseUrl = process.env.SWITCHBOARD_URL;
const apiKey = process.env.SWITCHBOARD_API_KEY;

test('the SDK round trip: models, a link, a webhook, a sandbox instance and a message', { skip: !baseUrl && 'SWITCHBOARD_URL is not set (make test-sdk sets it)' }, async () => {
  const client = switchboard({ baseUrl, apiKey });

  const models = await listModels({ client });
  assert.equal(models.response.status, 200);
  assert.equal(models.data.object, 'list');
  assert.ok(models.data.data.length > 0);

  // A receiver of link events (the server runs with loopback and plain http allowed for webhooks).
  const deliveries = [];
  let delivered;
  const arrived = new Promise((resolve) => { delivered = resolve; });
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      if (req.headers['webhook-signature']) { deliveries.push(JSON.parse(body)); delivered(); }
      res.end();
    });
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  try {
    const webhook = await createWebhook({ client, body: { url: `http://127.0.0.1:${receiver.address().port}/hook`, events: ['link.created'] } });
    assert.equal(webhook.response.status, 201, JSON.stringify(webhook.error));
    assert.match(webhook.data.secret, /^whsec_/);

    const link = await createLink({ client, body: { destination_url: 'https://example.com/sdk', slug: `sdk-ts-${Date.now()}` } });
    assert.equal(link.response.status, 201, JSON.stringify(link.error));
    assert.match(link.data.id, /^lnk_/);
    const again = await getLink({ client, path: { link_id: link.data.id } });
    assert.equal(again.data.destination_url, 'https://example.com/sdk');

    let timer;
    await Promise.race([arrived, new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('no link.created delivery')), 30000); })]);
    clearTimeout(timer);
    assert.equal(deliveries[0].type, 'link.created');
    assert.equal(deliveries[0].data.link.id, link.data.id);
  } finally {
    receiver.close();
  }

  const alice = await createInstance({ client, body: { name: 'Alice', provider: 'sandbox', config: { auto_pair: true } } });
  const bob = await createInstance({ client, body: { name: 'Bob', provider: 'sandbox', config: { auto_pair: true } } });
  assert.equal(alice.response.status, 201, JSON.stringify(alice.error));
  for (const instance of [alice, bob]) {
    const connecting = await connectInstance({ client, path: { instance_id: instance.data.id } });
    assert.ok(connecting.response.ok, JSON.stringify(connecting.error));
  }
  const bobAddress = await connected(client, bob.data.id);
  await connected(client, alice.data.id);

  const sent = await sendMessage({ client, path: { instance_id: alice.data.id }, body: { to: bobAddress, type: 'text', text: 'hello from the TypeScript SDK' } });
  assert.equal(sent.response.status, 202, JSON.stringify(sent.error));
  let message = sent.data;
  for (let i = 0; i < 100 && ['queued', 'sending'].includes(message.status); i++) {
    await new Promise((r) => setTimeout(r, 100));
    message = (await getMessage({ client, path: { instance_id: alice.data.id, message_id: sent.data.id } })).data;
  }
  assert.ok(['sent', 'delivered', 'read'].includes(message.status), message.status);

  // A failure is the problem document, typed, with its stable code.
  const missing = await getLink({ client, path: { link_id: 'lnk_00000000000000000000000000' } });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error.code, 'not_found');
  assert.equal(missing.response.headers.get('content-type'), 'application/problem+json');
});

async function connected(client, id) {
  for (let i = 0; i < 100; i++) {
    const { data } = await getInstance({ client, path: { instance_id: id } });
    if (data.status === 'connected') return data.account.address;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`instance ${id} did not connect`);
}
