// The dashboard's reading and control features in a real chromium against
// the real binary (issue 27's dashboard, issue 21's approval cards,
// issue 23's diffs, issue 24's context gauge): markdown as it streams,
// turns as one block, tool cards, approvals, the mode, compaction,
// rename / archive / delete, the pickers, feedback, the trace's folding
// and time axis, meta events out of "last activity", and the phone
// layout, light and dark.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Server, browserSuite, live, until } from './harness.mjs';

// One chromium for this file; no page may see a CSP violation or an error.
const open = browserSuite();

const TABLE = ['/echo Intro **bold** text.', '', '| name | n |', '| --- | --: |', '| alpha | 1 |', '| beta | 2 |', '', '```go', 'func main() {}', '```', '', 'tail paragraph'].join('\n');

test('markdown renders while the answer streams: a table, a highlighted code block with its language and a working copy button', async () => {
  const srv = await new Server(['--demo-delay', '40ms']).start();
  try {
    const s = await srv.createSession();
    const { page, ctx } = await open(`${srv.url}/#/s/${s.id}`);
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write']);
    await live(page);
    // Record, every frame, what the streaming message showed.
    await page.evaluate(() => {
      window.__seen = { strong: false, table: false, rawStars: false };
      const look = () => {
        const m = document.querySelector('.msg-assistant.msg-streaming .text');
        if (m) {
          window.__seen.strong ||= !!m.querySelector('strong');
          window.__seen.table ||= !!m.querySelector('.md-table table');
          window.__seen.rawStars ||= m.textContent.includes('**bold**');
        }
        requestAnimationFrame(look);
      };
      look();
    });
    await srv.submit(s.id, TABLE);
    await page.waitForSelector('#turn-status.st-completed', { timeout: 30_000 });
    // Rendered as markdown before the message completed: no raw stars, the table already a table.
    const seen = await page.evaluate(() => window.__seen);
    assert.deepEqual(seen, { strong: true, table: true, rawStars: false });
    assert.equal(await page.$$eval('.md-table tbody tr', (r) => r.length), 2);
    assert.equal(await page.getAttribute('.md-codeblock', 'data-lang'), 'go');
    assert.ok(await page.$('.md-code .tok-k'), 'keywords highlighted');
    await page.click('.md-codeblock button[data-copy="code"]');
    await page.waitForSelector('.md-codeblock button.copied');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'func main() {}');
    // The turn is one block with its totals, a copy button and the thumbs.
    assert.equal(await page.$$eval('section.turn', (t) => t.length), 1);
    const foot = await page.textContent('section.turn .turn-foot');
    assert.match(foot, /in · .* out/);
    assert.match(foot, /\$/);
  } finally {
    await srv.close();
  }
});

test('a turn with a tool round trip is one block; shell reads as "$ command" with its output; thumbs record feedback', async () => {
  const srv = await new Server(['--demo-delay', '2ms']).start();
  try {
    const s = await srv.createSession();
    await srv.req('PATCH', `/sessions/${s.id}`, { mode: 'auto' });
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    await srv.submit(s.id, '/tool shell {"command": "echo hello-from-shell"}');
    await page.waitForSelector('#turn-status.st-completed', { timeout: 30_000 });
    await page.waitForSelector('.tool-k-shell .shell-out');
    assert.equal((await page.textContent('.tool-k-shell .shell-cmd')).replace(/\s+/g, ' ').trim(), '$ echo hello-from-shell');
    assert.match(await page.textContent('.tool-k-shell .shell-out'), /hello-from-shell/);
    assert.equal(await page.$$eval('section.turn', (t) => t.length), 1, 'one block for the turn');
    assert.equal(await page.$$eval('section.turn [data-message-id]', (m) => m.length), 2, 'both model calls inside it');
    assert.match(await page.textContent('.turn-foot'), /2 model calls/);
    await page.click('.thumb[aria-label="good answer"]');
    await page.waitForSelector('.thumbs[data-rating="up"]');
    await until(async () => {
      const info = await srv.req('GET', `/sessions/${s.id}/messages`);
      return info.messages.length > 0;
    });
  } finally {
    await srv.close();
  }
});

test('an approval card: the badge in the title and the list, allow once runs the call; deny with a reason ends it', async () => {
  const srv = await new Server(['--demo-delay', '2ms']).start();
  try {
    const s = await srv.createSession();
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    assert.equal(await page.inputValue('#mode-select'), 'default');
    await srv.submit(s.id, '/tool shell {"command": "echo allowed"}');
    await page.waitForSelector('.tool-k-shell .approval', { timeout: 15_000 });
    await page.waitForSelector('#waiting-badge');
    await until(async () => (await page.title()).includes('waiting'), 5000, 'the page title');
    // The list shows the badge too.
    const list = await open(`${srv.url}/#/`);
    await list.page.waitForSelector(`tr[data-session="${s.id}"] .badge.st-waiting`);
    await until(async () => (await list.page.title()).includes('waiting'), 5000, 'the list title');
    await list.close();
    await page.click('.approval button[data-answer="once"]');
    await page.waitForSelector('#turn-status.st-completed', { timeout: 15_000 });
    assert.match(await page.textContent('.tool-k-shell .shell-out'), /allowed/);
    assert.equal(await page.$('#waiting-badge'), null);
    assert.ok(!(await page.title()).includes('waiting'));

    await srv.submit(s.id, '/tool shell {"command": "rm -rf build"}');
    await page.waitForSelector('.approval button[data-answer="deny-open"]', { timeout: 15_000 });
    await page.click('.approval button[data-answer="deny-open"]');
    await page.fill('.approval .deny-reason', 'not today');
    await page.click('.approval button[data-answer="deny"]');
    await page.waitForSelector('#turn-status:not(.st-in_flight)', { timeout: 15_000 });
    await page.waitForSelector('.tool-k-shell.tool-failed .tool-error');
    assert.equal(await page.$('.approval'), null);
  } finally {
    await srv.close();
  }
});

test('the mode switches from the header; an edit shows as a diff; Compact compacts', async () => {
  const srv = await new Server(['--demo-delay', '2ms']).start();
  try {
    const s = await srv.createSession();
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    await page.selectOption('#mode-select', 'accept_edits');
    await until(async () => (await srv.req('GET', `/sessions/${s.id}`)).session.mode === 'accept_edits', 5000, 'mode saved');
    await srv.submit(s.id, '/tool write_file {"path": "notes.md", "content": "first line\\nsecond line\\n"}');
    await page.waitForSelector('#turn-status.st-completed', { timeout: 15_000 });
    await page.waitForSelector('.tool-k-write_file .diff .dl-add');
    const added = await page.$$eval('.tool-k-write_file .diff .dl-add', (l) => l.map((x) => x.textContent.trim()));
    assert.ok(added.includes('+first line') && added.includes('+second line'), added.join('|'));
    assert.match(await page.textContent('#context-gauge'), /tokens|\//);
    await page.click('#compact');
    // The compaction ends (compacted, or failed with nothing to compact in so short a conversation) and the gauge says how.
    await until(async () => /compact(ed|ion failed)/.test((await page.getAttribute('#context-gauge', 'title')) ?? ''), 20_000, 'the compaction shown');
    const { messages } = await srv.req('GET', `/sessions/${s.id}/messages`);
    if (messages.some((m) => m.content.some((b) => b.type === 'compaction'))) await page.waitForSelector('.compaction-mark', { timeout: 15_000 });
  } finally {
    await srv.close();
  }
});

test("a page opened before the first turn shows the server's title once that turn starts, not the message as typed", async () => {
  const srv = await new Server().start();
  try {
    const s = await srv.createSession();
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    assert.equal(await page.textContent('.session-head h1'), 'new session');
    await srv.submit(s.id, '/echo # Fix the `parser` now');
    await srv.idle(s.id);
    const title = (await srv.req('GET', `/sessions/${s.id}`)).session.title;
    assert.equal(title, 'Fix the parser now');
    await until(async () => (await page.textContent('.session-head h1')) === title, 15_000, "the server's title in the header");
    assert.match(await page.title(), /^Fix the parser now · metis$/);
  } finally {
    await srv.close();
  }
});

test('rename, archive and delete from the pages; the new-session form picks a known workspace and a listed model', async () => {
  const srv = await new Server().start();
  try {
    await srv.createSession(); // another session in the same workspace, kept
    const s = await srv.createSession();
    await srv.submit(s.id, '/echo **hello** there');
    await srv.idle(s.id);
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    // The server's clean title, shown as is.
    assert.equal((await srv.req('GET', `/sessions/${s.id}`)).session.title, 'hello there');
    assert.equal(await page.textContent('.session-head h1'), 'hello there', "the server's title");
    // A rename is kept as typed, quotes and braces included, in the header and the list.
    const typed = 'my "renamed" {session}';
    await page.click('#rename');
    await page.fill('#rename-input', typed);
    await page.press('#rename-input', 'Enter');
    await until(async () => (await page.textContent('.session-head h1')) === typed, 10_000, 'the rename in the header');
    assert.equal((await srv.req('GET', `/sessions/${s.id}`)).session.title, typed);
    await page.reload();
    await live(page);
    assert.equal(await page.textContent('.session-head h1'), typed, 'the rename after a reload');

    await page.goto(`${srv.url}/#/`);
    await until(async () => (await page.textContent(`tr[data-session="${s.id}"] td.title a`).catch(() => null)) === typed, 15_000, 'the rename in the list');
    await page.click(`tr[data-session="${s.id}"] button[data-action="archive"]`);
    await page.waitForSelector(`tr[data-session="${s.id}"]`, { state: 'detached' });
    await page.check('#show-archived');
    await page.waitForSelector(`tr[data-session="${s.id}"].archived`);
    page.once('dialog', (d) => d.accept());
    await page.click(`tr[data-session="${s.id}"] button[data-action="delete"]`);
    await page.waitForSelector(`tr[data-session="${s.id}"]`, { state: 'detached' });
    await assert.rejects(srv.req('GET', `/sessions/${s.id}`), (e) => e.status === 404);

    // The form: the known workspace is chosen, the model list comes from the server.
    await page.uncheck('#show-archived');
    assert.equal(await page.inputValue('#new-workspace-pick'), srv.workspace);
    const models = await page.$$eval('#new-model option', (o) => o.map((x) => x.textContent));
    assert.ok(models.some((m) => m.includes('builtin:demo')), models.join('|'));
    await page.click('#create-session');
    await page.waitForURL(/#\/s\/sess_/);
    await live(page);
  } finally {
    await srv.close();
  }
});

test('viewing a session does not move its last activity; the trace folds deltas and meta events and has a time axis', async () => {
  const srv = await new Server(['--demo-delay', '2ms']).start();
  try {
    const s = await srv.createSession();
    await srv.submit(s.id, 'what is in my workspace?');
    await srv.idle(s.id);
    const before = (await srv.req('GET', `/sessions/${s.id}`)).session.last_activity_at;
    const { page, close } = await open(`${srv.url}/#/s/${s.id}/trace`);
    await live(page);
    await page.waitForSelector('#trace-history:has-text("history:")');
    await page.waitForSelector('.wf-tick');
    assert.ok((await page.$$('.wf-tick')).length >= 2, 'ticks on the time axis');
    const types = new Set(await page.$$eval('.trow[data-type]', (r) => r.map((x) => x.getAttribute('data-type'))));
    assert.ok(!types.has('text.delta'), 'deltas folded by default');
    assert.ok(![...types].some((t) => t.startsWith('bus.')), 'meta events folded by default');
    assert.match(await page.textContent('#trace-folded'), /deltas/);
    await page.check('#trace-deltas');
    await page.waitForSelector('.trow[data-type="text.delta"]');
    await close();
    // The page attached and left (bus.subscriber_* events were written); the list's last activity did not move.
    await new Promise((r) => setTimeout(r, 300));
    const list = await srv.req('GET', '/sessions');
    assert.equal(list.sessions.find((x) => x.id === s.id).last_activity_at, before);
  } finally {
    await srv.close();
  }
});

for (const scheme of ['light', 'dark']) {
  test(`the phone layout (390x844, ${scheme}) never scrolls sideways; the search button opens the palette on touch`, async () => {
    const srv = await new Server(['--demo-delay', '2ms']).start();
    try {
      const s = await srv.createSession();
      await srv.submit(s.id, TABLE.replace('Intro', 'A long paragraph that goes on and on with_a_rather_long_identifier_that_does_not_break easily'));
      await srv.idle(s.id);
      await srv.submit(s.id, '/tool delegate {"task": "/echo from the worker", "model": "builtin:demo"}');
      await srv.idle(s.id);
      const { page } = await open(`${srv.url}/#/`, { viewport: { width: 390, height: 844 }, colorScheme: scheme, touch: true });
      const wide = () => page.evaluate(() => document.documentElement.scrollWidth);
      await page.waitForSelector(`tr[data-session="${s.id}"]`);
      assert.ok((await wide()) <= 390, `sessions page ${await wide()} px wide`);
      for (const tab of ['', '/workers', '/trace']) {
        await page.goto(`${srv.url}/#/s/${s.id}${tab}`);
        await live(page);
        await page.waitForTimeout(300);
        assert.ok((await wide()) <= 390, `session page${tab} ${await wide()} px wide`);
      }
      await page.tap('#palette-button');
      await page.waitForSelector('#palette-input');
      assert.ok((await wide()) <= 390, 'palette');
    } finally {
      await srv.close();
    }
  });
}
