// Logging in to a server that requires its token, in a real chromium
// against the real binary: the login page, the session cookie on the API
// and the stream, logout, a replayed cookie, a restart.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Server, launch, live, openPage } from './harness.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

/** A request to srv with the bearer token (or a cookie header). */
async function call(srv, method, p, { token, cookie, body } = {}) {
  const headers = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (cookie) headers.cookie = cookie;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(srv.url + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, json: await res.json().catch(() => undefined) };
}

test('a browser logs in, streams with its session cookie, logs out; the cookie is dead after, alive across a restart', async () => {
  const srv = await new Server(['--public-name', 'metis.example']).start();
  const p = await openPage(browser);
  try {
    const token = readFileSync(path.join(srv.home, 'token'), 'utf8').trim();
    const { json: s } = await call(srv, 'POST', '/sessions', { token, body: { workspace_path: srv.workspace } });

    // The dashboard sends a browser without a session to the login page.
    await p.page.goto(`${srv.url}/#/s/${s.id}`);
    await p.page.waitForURL((u) => u.pathname === '/login');
    await p.page.fill('#t', 'not-the-token-0123456789');
    await p.page.click('button[type=submit]');
    await p.page.waitForFunction(() => document.getElementById('msg').textContent.includes('refused'));
    await p.page.fill('#t', token);
    await p.page.click('button[type=submit]');
    await p.page.waitForURL((u) => !u.pathname.startsWith('/login'));

    const [c] = (await p.ctx.cookies()).filter((k) => k.name.includes('metis_session'));
    assert.equal(c.name, 'metis_session', 'plain http: no __Host- prefix');
    assert.ok(c.httpOnly && c.sameSite === 'Strict' && c.path === '/' && !c.secure, JSON.stringify(c));
    assert.notEqual(c.value, token);
    const jar = `${c.name}=${c.value}`;

    // The API and the stream with the cookie alone.
    await p.page.goto(`${srv.url}/#/s/${s.id}`);
    await live(p.page);
    await p.page.fill('#composer', '/echo over the cookie');
    await p.page.keyboard.press('Enter');
    await p.page.waitForSelector('#turn-status.st-completed', { timeout: 30_000 });

    // A restart keeps the session.
    await srv.restart();
    await p.page.reload();
    await live(p.page);
    assert.equal((await call(srv, 'GET', '/sessions', { cookie: jar })).status, 200);

    // Logout (no content type, as a plain fetch sends it) ends it: the
    // page goes back to the login, and the cookie replayed is refused.
    const out = await p.page.evaluate(async () => (await fetch('/logout', { method: 'POST' })).status);
    assert.equal(out, 204);
    await p.page.reload();
    await p.page.waitForURL((u) => u.pathname === '/login');
    const replay = await call(srv, 'GET', '/sessions', { cookie: jar });
    assert.equal(replay.status, 401);
    assert.equal(replay.json.error.code, 'unauthorized');
    assert.deepEqual(p.errors(), [], 'page errors');
    assert.deepEqual(p.csp(), [], 'CSP violations');
  } finally {
    await p.close();
    await srv.close();
  }
});
