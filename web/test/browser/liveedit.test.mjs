// session.updated in a real chromium against the real binary: another
// client's rename and archive (PATCH /sessions/{id} sent from outside the
// page) show in the session page's header and the session list without
// a reload.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Server, browserSuite, live, until } from './harness.mjs';

// One chromium for this file; no page may see a CSP violation or an error.
const open = browserSuite();

const SHOT = process.env.METIS_LIVEEDIT_SHOT;

test("another client's rename and archive show in the header and the list at once, without a reload", async () => {
  const srv = await new Server().start();
  try {
    const s = await srv.createSession();
    await srv.submit(s.id, '/echo **hello** there');
    await srv.idle(s.id);
    const { page } = await open(`${srv.url}/#/`);
    await page.waitForSelector(`tr[data-session="${s.id}"] td.title a:has-text("hello there")`);
    await page.click(`tr[data-session="${s.id}"]`);
    await live(page);
    assert.equal(await page.textContent('.session-head h1'), 'hello there');
    // A page that reloaded would lose this.
    await page.evaluate(() => (window.__sameDocument = true));

    // The rename comes as session.updated: no turn, no reload.
    const renamed = 'renamed by "another" client';
    await srv.req('PATCH', `/sessions/${s.id}`, { title: renamed });
    await until(async () => (await page.textContent('.session-head h1')) === renamed, 10_000, 'the rename in the header');
    await until(async () => (await page.title()).includes(renamed), 5_000, 'the rename in the tab title');
    assert.equal(await page.$('#archived-badge'), null, 'not archived yet');

    await srv.req('PATCH', `/sessions/${s.id}`, { archived: true });
    await page.waitForSelector('#archived-badge', { timeout: 10_000 });
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page was not reloaded');
    if (SHOT) await page.screenshot({ path: SHOT });

    // The list this page came from has the row in the archived view, renamed.
    await page.click('.session-head a.back');
    await page.waitForSelector(`tr[data-session="${s.id}"]`, { state: 'detached' });
    await page.check('#show-archived');
    await page.waitForSelector(`tr[data-session="${s.id}"].archived td.title a:has-text('${renamed}')`);

    // Back from the archive, renamed again, while the list shows.
    await page.uncheck('#show-archived');
    await srv.req('PATCH', `/sessions/${s.id}`, { title: 'back again', archived: false });
    await until(async () => (await page.textContent(`tr[data-session="${s.id}"] td.title a`).catch(() => null)) === 'back again', 10_000, 'the rename in the list');
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page was not reloaded');
  } finally {
    await srv.close();
  }
});
