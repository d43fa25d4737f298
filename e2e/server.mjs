// Starts a real Switchboard binary on a fresh SQLite database for browser tests, and drives its CLI.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { before, after } from 'node:test';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';

const binary = process.env.SWITCHBOARD_BIN ?? join(process.cwd(), 'bin', 'switchboard');

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** Starts the server (with extra serve flags, if any); returns {url, cli(args) → parsed JSON, stop()}. */
export async function startSwitchboard(extraArgs = [], extraEnv = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-'));
  const env = { ...process.env, ...extraEnv, DATABASE_URL: `file:${join(dir, 'switchboard.db')}` };
  const port = await freePort();
  const proc = spawn(binary, ['serve', '--addr', `127.0.0.1:${port}`, ...extraArgs], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let logs = '';
  proc.stderr.on('data', (d) => { logs += d; });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) break;
    } catch { /* not up yet */ }
    if (i > 200) throw new Error(`server did not start:\n${logs}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    cli: (args) => JSON.parse(execFileSync(binary, [...args, '--json'], { env }).toString()),
    logs: () => logs,
    stop: () => new Promise((resolve) => { proc.on('exit', resolve); proc.kill('SIGTERM'); }),
  };
}

/** Launches Debian's Chromium headless (never a downloaded browser). */
export async function launchBrowser() {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
  });
}

export const screenshotDir = process.env.SCREENSHOT_DIR ?? join(process.cwd(), 'e2e', 'screenshots');

/** Signs a new user up in page and creates a workspace; the console then shows the API keys page. */
export async function signUpWithWorkspace(page, url, email, workspace) {
  await page.goto(`${url}/user/sign-up`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('correct horse battery staple');
  await page.getByRole('button', { name: 'Sign up' }).click();
  await page.waitForURL(/\/user\/workspaces/);
  await page.getByLabel('Workspace name').fill(workspace);
  await page.getByRole('button', { name: 'Create workspace' }).click();
  await page.waitForURL(/\/user\/api/);
}

/**
 * Starts a server (with extra serve flags) and Chromium before the calling file's tests and stops both after them.
 * Returns the file's handle: its sb (see startSwitchboard) and browser are set once the tests run.
 */
export function withSwitchboard(extraArgs = [], extraEnv = async () => ({})) {
  const handle = { sb: undefined, browser: undefined };
  before(async () => {
    handle.sb = await startSwitchboard(extraArgs, await extraEnv());
    handle.browser = await launchBrowser();
    mkdirSync(screenshotDir, { recursive: true });
  });
  after(async () => {
    await handle.browser?.close();
    await handle.sb?.stop();
  });
  return handle;
}
