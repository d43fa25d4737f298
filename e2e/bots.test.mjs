// Models and bots as their users meet them: the official `openai` npm SDK pointed at Switchboard lists and
// retrieves the models of an OpenAI-compatible upstream (a fake in this file that follows OpenAI's published
// shapes), gets a completion and a stream through /api/v1/chat/completions, and reads a refusal's message; then, in
// Chromium, a user adds a model bot to a sandbox instance from its console page, writes to it from another instance,
// gets the model's answer, writes "human" and sees the chat listed as with a human until given back.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { join } from 'node:path';
import OpenAI from 'openai';
import { screenshotDir, signUpWithWorkspace, withSwitchboard } from './server.mjs';

const upstreamKey = 'sk-e2e-upstream';
const upstreamCalls = [];

/** A small OpenAI-compatible server: one model, completions that echo the last message, streams with usage. */
function startUpstream() {
  const srv = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (req.headers.authorization !== `Bearer ${upstreamKey}`) {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'bad key', type: 'invalid_request_error', code: 'invalid_api_key' } }));
        return;
      }
      if (req.method === 'GET' && req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ id: 'llama3.1', object: 'model', created: 1700000000, owned_by: 'e2e' }] }));
        return;
      }
      if (req.method === 'POST' && req.url === '/v1/chat/completions') {
        const body = JSON.parse(Buffer.concat(chunks).toString());
        upstreamCalls.push(body);
        const last = body.messages.at(-1).content;
        const usage = { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 };
        const base = { id: 'chatcmpl-e2e', created: 1700000000, model: body.model };
        if (body.stream) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          for (const piece of ['echo: ', last]) {
            res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk',
              choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })}\n\n`);
          }
          res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk',
            choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
          if (body.stream_options?.include_usage) {
            res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [], usage })}\n\n`);
          }
          res.end('data: [DONE]\n\n');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ...base, object: 'chat.completion', usage,
          choices: [{ index: 0, message: { role: 'assistant', content: `echo: ${last}` }, finish_reason: 'stop' }] }));
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'no such route', type: 'invalid_request_error' } }));
    });
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv)));
}

let upstream;
after(() => upstream?.close());

// The server starts with the upstream configured, as an operator's environment would have it.
const app = withSwitchboard(['--send-rate', '0', '--webhook-allow-http', '--webhook-allowed-networks', '127.0.0.0/8'],
  async () => {
    upstream = await startUpstream();
    return { SWITCHBOARD_MODEL_UPSTREAMS: JSON.stringify([{ name: 'e2e',
      base_url: `http://127.0.0.1:${upstream.address().port}/v1`, api_key: upstreamKey }]) };
  });

test('the official openai SDK: models, a completion, a stream and a refusal', async () => {
  const ws = app.sb.cli(['workspace', 'create', '--name', 'SDK models']);
  const key = app.sb.cli(['key', 'create', '--workspace', ws.id, '--name', 'sdk', '--scopes', 'models:read']);
  const client = new OpenAI({ apiKey: key.secret, baseURL: `${app.sb.url}/api/v1`, maxRetries: 0 });

  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, ['llama3.1']);
  const model = await client.models.retrieve('llama3.1');
  assert.equal(model.id, 'llama3.1');
  assert.equal(model.object, 'model');

  const done = await client.chat.completions.create({ model: 'llama3.1', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(done.choices[0].message.content, 'echo: hi');
  assert.equal(done.usage.total_tokens, 18);

  const stream = await client.chat.completions.create({ model: 'llama3.1', stream: true,
    messages: [{ role: 'user', content: 'streamed' }] });
  let text = '';
  let usage;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    usage = chunk.usage ?? usage;
  }
  assert.equal(text, 'echo: streamed');
  assert.equal(usage?.total_tokens, 18, 'the stream ends with its usage (Switchboard asks the upstream for it)');

  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    (err) => {
      assert.ok(err instanceof OpenAI.APIError, `an APIError, not ${err?.constructor?.name}`);
      assert.ok(err.status >= 400 && err.status < 500, `status ${err.status}`);
      assert.ok(err.message && err.message.length > 10, `a message that says why: ${err.message}`);
      return true;
    });
});

test('a model bot added in the console answers, and hands the chat to a human', async () => {
  const context = await app.browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (err) => errors.push(err.message));
  const shot = (name) => page.screenshot({ path: join(screenshotDir, `bots-${name}.png`), fullPage: true });

  await signUpWithWorkspace(page, app.sb.url, 'bo@example.com', 'Acme bots');
  const create = async (name) => {
    await page.goto(`${app.sb.url}/user/channels`);
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByRole('radio', { name: /Sandbox/ }).check();
    await page.getByRole('textbox', { name: 'display_name', exact: true }).fill(`${name} Co`);
    await page.getByRole('checkbox', { name: 'auto_pair' }).check();
    await page.getByRole('button', { name: 'Create instance' }).click();
    await page.waitForURL(/\/user\/channels\/ins_/);
    const id = page.url().split('/').pop();
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.locator('#instance-status[data-status="connected"]').waitFor({ timeout: 15000 });
    const address = (await page.getByText(/Connected as/).innerText()).match(/\+999\d+/)[0];
    return { id, address };
  };
  const alice = await create('Alice');
  const bob = await create('Bob');

  // On Bob's page: add a model bot with the form.
  const form = page.locator('#bot-form');
  await form.getByLabel('Name').fill('Helper');
  await form.getByLabel('Model', { exact: true }).fill('llama3.1');
  await form.getByLabel('System prompt').fill('Answer in one line.');
  await form.getByLabel('Handoff keyword').fill('human');
  await form.getByLabel('Daily limit').fill('10000');
  await form.getByRole('button', { name: 'Add the bot' }).click();
  await page.waitForURL(/done=bot-added/);
  assert.match(await page.locator('#bot-list').innerText(), /Helper[\s\S]*llama3\.1[\s\S]*10000 tokens a day/);

  // Alice writes to Bob; the bot's answer arrives at Alice.
  await page.goto(`${app.sb.url}/user/channels/${alice.id}`);
  await page.getByLabel('To', { exact: true }).fill(bob.address);
  await page.getByLabel('Text', { exact: true }).fill('when do you open?');
  await page.getByRole('button', { name: 'Send' }).click();
  await page.getByRole('cell', { name: 'echo: when do you open?' }).waitFor({ timeout: 20000 });
  const asked = upstreamCalls.at(-1);
  assert.equal(asked.messages[0].role, 'system');
  assert.equal(asked.messages.at(-1).content, 'when do you open?');

  // Bob's page shows the run and what it cost.
  await page.goto(`${app.sb.url}/user/channels/${bob.id}`);
  await page.locator('.bot-runs').getByText('replied').waitFor();
  assert.match(await page.locator('.bot-runs').innerText(), /18 tokens/);
  await shot('01-answered');

  // "human": the chat is with a human until given back; the bot leaves it alone.
  await page.goto(`${app.sb.url}/user/channels/${alice.id}`);
  await page.getByLabel('To', { exact: true }).fill(bob.address);
  await page.getByLabel('Text', { exact: true }).fill('human');
  await page.getByRole('button', { name: 'Send' }).click();
  await page.waitForURL(/done=sent/);
  const calls = upstreamCalls.length;
  for (let i = 0; ; i++) {
    await page.goto(`${app.sb.url}/user/channels/${bob.id}`);
    if (await page.locator('#takeovers').count()) break;
    assert.ok(i < 100, 'the chat was not handed to a human');
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.match(await page.locator('#takeovers').innerText(), new RegExp(alice.address.replace('+', '\\+')));
  await shot('02-with-a-human');
  assert.equal(upstreamCalls.length, calls, 'the handoff keyword is not sent to the model');
  await page.getByRole('button', { name: 'Give back to the bots' }).click();
  await page.waitForURL(/done=bot-resumed/);
  await page.getByText('No chat is with a human.').waitFor();
  assert.deepEqual(errors, []);
  await context.close();
});
