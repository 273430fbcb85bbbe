// Test harness for the dashboard's browser tests, screenshots and
// benchmark: the real metis binary on a loopback port with a temp home
// (builtin:demo), a real chromium through playwright-core, and small
// HTTP/WebSocket helpers that talk to the server directly.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const METIS = process.env.METIS_BIN || path.join(root, 'bin/metis');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

// Servers still running when this process exits (a failed script) are
// killed with it rather than left behind.
const running = new Set();
process.on('exit', () => {
  for (const p of running) p.kill('SIGKILL');
});

/** One metis server process; restart() keeps its home and port. */
export class Server {
  constructor(args = []) {
    this.home = mkdtempSync(path.join(tmpdir(), 'metis-dash-'));
    this.workspace = path.join(this.home, 'workspace');
    mkdirSync(path.join(this.workspace, 'src'), { recursive: true });
    writeFileSync(path.join(this.workspace, 'README.md'), '# demo workspace\n');
    writeFileSync(path.join(this.workspace, 'main.go'), 'package main\n');
    this.args = args;
    this.addr = '127.0.0.1:0';
    this.log = '';
  }

  async start() {
    const proc = spawn(METIS, ['serve', '--home', this.home, '--addr', this.addr, ...this.args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ANTHROPIC_API_KEY: '', OPENAI_API_KEY: '', OPENAI_BASE_URL: '' },
    });
    this.proc = proc;
    running.add(proc);
    proc.on('exit', () => running.delete(proc));
    proc.stderr.on('data', (b) => (this.log += b));
    this.url = await new Promise((resolve, reject) => {
      let out = '';
      const t = setTimeout(() => reject(new Error('metis serve: no ready line in 30s\n' + this.log)), 30_000);
      proc.stdout.on('data', (b) => {
        out += b;
        const m = /^metis serving (http:\/\/\S+)/m.exec(out);
        if (m) {
          clearTimeout(t);
          resolve(m[1]);
        }
      });
      proc.on('exit', (code) => reject(new Error(`metis serve exited ${code}\n${this.log}`)));
    });
    this.addr = new URL(this.url).host; // a restart reuses the port
    return this;
  }

  /** SIGTERM and wait for the exit. */
  async stop() {
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    await new Promise((resolve) => {
      const t = setTimeout(() => p.kill('SIGKILL'), 20_000);
      p.once('exit', () => (clearTimeout(t), resolve()));
      p.kill('SIGTERM');
    });
  }

  async restart() {
    await this.stop();
    await this.start();
  }

  async close() {
    await this.stop();
    rmSync(this.home, { recursive: true, force: true });
  }

  async req(method, p, body) {
    const res = await fetch(this.url + p, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (!res.ok) throw Object.assign(new Error(`${method} ${p}: ${res.status} ${text}`), { status: res.status, json });
    return json;
  }

  createSession(model) {
    return this.req('POST', '/sessions', { workspace_path: this.workspace, ...(model ? { model } : {}) });
  }
  submit(sid, content) {
    return this.req('POST', `/sessions/${sid}/turns`, { content });
  }
  messages(sid) {
    return this.req('GET', `/sessions/${sid}/messages?limit=500`);
  }
  async metrics() {
    return (await fetch(this.url + '/metrics')).text();
  }

  /**
   * A shell line that waits until release(name): a command that holds a
   * turn running for exactly as long as the test needs, however slow the
   * machine (a fixed sleep races the steps that need it still running).
   */
  gate(name) {
    return `while [ ! -e .gate-${name} ]; do sleep 0.05; done`;
  }
  release(name) {
    writeFileSync(path.join(this.workspace, `.gate-${name}`), '');
  }

  /** Waits until the session has no turn in flight. */
  async idle(sid, timeoutMs = 30_000) {
    await until(async () => {
      const { sessions } = await this.req('GET', '/sessions');
      const s = sessions.find((x) => x.id === sid);
      return s && !s.current_turn_id;
    }, timeoutMs, 'session idle');
  }

  /**
   * An independent observer: a WebSocket subscription from Node
   * (preset:full, snapshot) that records every event.
   */
  async observe(sid, filter = 'preset:full') {
    const info = await this.req('GET', `/sessions/${sid}`);
    const ws = new WebSocket(info.ws_url);
    const events = [];
    const acked = new Promise((resolve, reject) => {
      ws.onerror = () => reject(new Error('observer socket failed'));
      ws.onopen = () => ws.send(JSON.stringify({ type: 'subscribe', filter, since: null, snapshot: true }));
      ws.onmessage = (m) => {
        const f = JSON.parse(m.data);
        if (f.type === 'subscribe_ack') resolve();
        else if (f.type === 'event') events.push(f.event);
        else if (f.type === 'ping') ws.send(JSON.stringify({ type: 'pong', nonce: f.nonce }));
      };
    });
    await acked;
    return { events, close: () => ws.close() };
  }
}

export async function until(fn, timeoutMs = 15_000, what = 'condition') {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run'],
  });
}

/**
 * A page at 1280x800 that records console messages and page errors;
 * csp() lists the Content-Security-Policy violations seen.
 */
export async function openPage(browser, url, opts = {}) {
  const ctx = await browser.newContext({ viewport: opts.viewport ?? { width: 1280, height: 800 }, colorScheme: opts.colorScheme ?? 'light', hasTouch: !!opts.touch, isMobile: !!opts.touch });
  const page = await ctx.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  if (url) await page.goto(url);
  return {
    page,
    ctx,
    logs,
    csp: () => logs.filter((l) => /Content Security Policy|Content-Security-Policy/i.test(l)),
    errors: () => logs.filter((l) => l.startsWith('pageerror')),
    close: () => ctx.close(),
  };
}

/**
 * Sets up a test file's browser: one chromium for the file's tests,
 * closed after them, and a check then that no page any test opened saw
 * a CSP violation or an uncaught error. Returns open(url, opts), which
 * opens a page (openPage) that the check covers, and open.forget(page),
 * which leaves one out.
 */
export function browserSuite() {
  let browser;
  const pages = [];
  before(async () => {
    browser = await launch();
  });
  after(async () => {
    const csp = pages.flatMap((p) => p.csp());
    const errors = pages.flatMap((p) => p.errors());
    await browser?.close();
    assert.deepEqual(csp, [], 'CSP violations');
    assert.deepEqual(errors, [], 'page errors');
  });
  const open = async (url, opts) => {
    const p = await openPage(browser, url, opts);
    pages.push(p);
    return p;
  };
  /** Leaves a page out of the check (its violations were the test's own). */
  open.forget = (p) => {
    const i = pages.indexOf(p);
    if (i >= 0) pages.splice(i, 1);
  };
  return open;
}

/** Waits for the session page's connection badge to say live. */
export async function live(page, timeout = 30_000) {
  await page.waitForSelector('#conn-state[data-state=live]', { timeout });
}

/** The text of each message on the page, by message id (whitespace normalized). */
export async function pageMessages(page) {
  return page.$$eval('[data-message-id]', (els) =>
    els.map((el) => ({
      id: el.getAttribute('data-message-id'),
      session: el.getAttribute('data-session'),
      cls: el.className,
      text: [...el.querySelectorAll('.text')].map((t) => t.innerText).join(' ').replace(/\s+/g, ' ').trim(),
    })),
  );
}

/** A stored message's text blocks (whitespace normalized). */
export function storedText(m) {
  return m.content.filter((b) => b.type === 'text').map((b) => asShown(b.text)).join(' ').replace(/\s+/g, ' ').trim();
}

/**
 * A text as the page shows it once its markdown is rendered: without
 * list bullets, emphasis markers and code backticks (the demo's guide
 * uses all three).
 */
function asShown(text) {
  return text.replace(/^\s*[-*] /gm, '').replace(/\*\*|`/g, '');
}

/**
 * Every row of trace mode's (virtualized) event log, in the order listed:
 * scrolls through the list and collects the rows as they render.
 */
export async function traceRows(page) {
  return page.evaluate(async () => {
    const box = document.querySelector('.vlist.events');
    const rows = new Map();
    box.scrollTop = 0;
    for (let i = 0; i < 2000; i++) {
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      for (const el of box.querySelectorAll('.trow[data-event-id]')) {
        rows.set(el.getAttribute('data-event-id'), { type: el.getAttribute('data-type'), y: el.getBoundingClientRect().top + box.scrollTop });
      }
      if (box.scrollTop + box.clientHeight >= box.scrollHeight - 1) break;
      box.scrollTop += box.clientHeight / 2;
    }
    return [...rows.entries()].sort((a, b) => a[1].y - b[1].y).map(([id, r]) => ({ id, type: r.type }));
  });
}
