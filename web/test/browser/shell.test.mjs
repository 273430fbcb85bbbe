// Shell tool cards in a real chromium against the real binary: a running
// command's output live (tool.output_delta) with stderr marked, as text
// never markup, then replaced by the result; a non-zero exit shown as a
// failure; the note where output is missing (a page opened mid-command);
// the card bounded and following the newest line only at its end; and
// the background strip's owner_lost (an event only a cluster failover
// makes, injected into the page's socket).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Server, browserSuite, live, until } from './harness.mjs';

// One chromium for this file; no page may see a CSP violation or an error.
const open = browserSuite();

/** A session in auto mode (the shell runs without asking). */
async function autoSession(srv) {
  const s = await srv.createSession();
  await srv.req('PATCH', `/sessions/${s.id}`, { mode: 'auto' });
  return s;
}

const shell = (command) => '/tool shell ' + JSON.stringify({ command });
const card = '.tool-k-shell';
const liveOut = `${card} [data-live-output]`;

test("a running shell command's output shows live in its card, stderr marked and as text, then the result replaces it", async () => {
  const srv = await new Server().start();
  try {
    const s = await autoSession(srv);
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    const out = (i) => `echo "out ${i} <b>x</b>"; echo "err ${i}" >&2`;
    await srv.submit(s.id, shell(`${out(1)}; ${srv.gate('a')}; ${out(2)}; ${srv.gate('b')}; ${out(3)}`));
    // While the command runs (the result is not there yet): its first lines, by stream.
    await page.waitForSelector(`${liveOut} .stdout`, { timeout: 20_000 });
    await until(async () => (await page.textContent(liveOut)).includes('err 1'), 10_000, 'stderr live');
    assert.equal(await page.$(`${card} pre.shell-out:not([data-live-output])`), null, 'no result yet');
    assert.match(await page.textContent(`${liveOut} .stdout`), /^out 1 <b>x<\/b>\n/, 'output is text');
    assert.equal(await page.$(`${liveOut} b`), null, 'output never becomes markup');
    assert.match(await page.textContent(`${liveOut} .stderr`), /err 1/);
    assert.equal(await page.textContent(`${card} .badge`), 'running');
    const before = (await page.textContent(liveOut)).length;
    srv.release('a');
    await until(async () => (await page.textContent(liveOut).catch(() => '')).includes('out 2'), 10_000, 'more output as it arrives');
    assert.ok((await page.textContent(liveOut)).length > before);
    srv.release('b');
    // tool.completed: the result replaces the live output.
    await page.waitForSelector(liveOut, { state: 'detached', timeout: 20_000 });
    // The finished output without the result's labels: stdout, then stderr marked.
    assert.match(await page.textContent(`${card} pre.shell-out .stdout`), /^out 1 <b>x<\/b>\nout 2 <b>x<\/b>\nout 3 <b>x<\/b>\n$/);
    assert.equal(await page.textContent(`${card} pre.shell-out .stderr`), 'err 1\nerr 2\nerr 3\n');
    assert.doesNotMatch(await page.textContent(`${card} pre.shell-out`), /exit code|stdout:|stderr:/);
    assert.equal(await page.textContent(`${card} .badge`), 'completed');
  } finally {
    await srv.close();
  }
});

test('a shell command that exits non-zero is shown failed with its code, not completed', async () => {
  const srv = await new Server().start();
  try {
    const s = await autoSession(srv);
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    await srv.submit(s.id, shell('echo oops >&2; exit 3'));
    await srv.idle(s.id);
    await page.waitForSelector(`${card} pre.shell-out:not([data-live-output])`, { timeout: 15_000 });
    const badge = `${card} .badge`;
    assert.equal(await page.textContent(badge), 'exit 3');
    assert.match(await page.getAttribute(badge, 'class'), /\bst-failed\b/);
    assert.match(await page.getAttribute(card, 'class'), /\btool-failed\b/);
    assert.match(await page.getAttribute(`${card} pre.shell-out`, 'class'), /\bshell-failed\b/);
    assert.equal(await page.textContent(`${card} pre.shell-out`), 'oops\n', 'stderr alone, no empty stdout');
    // A page opened afterwards (the snapshot holds the stored result, not the event) says the same.
    await page.reload();
    await live(page);
    await page.waitForSelector(`${card} pre.shell-out`, { timeout: 15_000 });
    assert.equal(await page.textContent(badge), 'exit 3', 'after a reload');
    assert.match(await page.getAttribute(`${card} pre.shell-out`, 'class'), /\bshell-failed\b/, 'after a reload');
    // A zero exit stays a completed call.
    await srv.submit(s.id, shell('true'));
    await srv.idle(s.id);
    await until(async () => (await page.$$(card)).length === 2, 15_000, 'the second card');
    const second = (await page.$$(card))[1];
    assert.equal(await (await second.$('.badge')).textContent(), 'completed');
    assert.equal(await (await second.$('.shell-empty')).textContent(), 'no output');
  } finally {
    await srv.close();
  }
});

test('a page opened while a command runs says the output before it is no longer held, then shows what follows', async () => {
  const srv = await new Server().start();
  try {
    const s = await autoSession(srv);
    await srv.submit(s.id, shell(`for i in 1 2 3; do echo "line $i"; done; ${srv.gate('rest')}; echo "line 4"; ${srv.gate('end')}; for i in 5 6; do echo "line $i"; done`));
    // Wait until the command has printed (its first lines stream before this page exists).
    const obs = await srv.observe(s.id);
    await until(() => obs.events.some((e) => e.type === 'tool.output_delta' && /line 2/.test(e.payload.data)), 20_000, 'the command printing');
    obs.close();
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    // Running (the snapshot's running_tools), though no output has arrived since the page opened.
    await page.waitForSelector(`${card} .badge`);
    assert.equal(await page.textContent(`${card} .badge`), 'running');
    // The next output says how much came before it.
    srv.release('rest');
    await page.waitForSelector(`${liveOut} .shell-gap`, { timeout: 15_000 });
    assert.match(await page.textContent(`${liveOut} .shell-gap`), /^… the first \d+ bytes of output were no longer held$/);
    await until(async () => /line 4/.test(await page.textContent(liveOut).catch(() => '')), 15_000, 'the output that follows');
    assert.doesNotMatch(await page.textContent(`${liveOut} .stdout`), /line 1\n/, 'the start was not shown');
    srv.release('end');
    await page.waitForSelector(liveOut, { state: 'detached', timeout: 20_000 });
    assert.match(await page.textContent(`${card} pre.shell-out`), /line 1\nline 2/, 'the result has it all');
  } finally {
    await srv.close();
  }
});

test('live output stays bounded, and follows the newest line only while scrolled to the end', async () => {
  const srv = await new Server().start();
  try {
    const s = await autoSession(srv);
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    // About 200 KB in 50 lines: 20, 30 more once the reader has scrolled up, then held until the checks are done.
    const rows = (from, to) => `for i in $(seq ${from} ${to}); do printf 'row %03d ' $i; head -c 4000 /dev/zero | tr '\\0' x; echo; sleep 0.05; done`;
    await srv.submit(s.id, shell(`${rows(1, 20)}; ${srv.gate('more')}; ${rows(21, 50)}; ${srv.gate('end')}`));
    await page.waitForSelector(liveOut, { timeout: 20_000 });
    const atEnd = () => page.$eval(liveOut, (el) => el.scrollTop + el.clientHeight >= el.scrollHeight - 8);
    await until(async () => (await page.textContent(liveOut)).includes('row 010'), 15_000, 'output');
    assert.ok(await atEnd(), 'follows the newest line');
    // Scrolled up: it holds still while output arrives.
    await page.$eval(liveOut, (el) => (el.scrollTop = 0));
    const seen = await page.textContent(liveOut);
    srv.release('more');
    await until(async () => (await page.textContent(liveOut)) !== seen, 10_000, 'more output');
    assert.equal(await page.$eval(liveOut, (el) => el.scrollTop), 0, 'held where the reader scrolled');
    // Back at the end: it follows again.
    await page.$eval(liveOut, (el) => (el.scrollTop = el.scrollHeight));
    await until(async () => (await page.textContent(liveOut)).includes('row 050'), 20_000, 'all rows');
    assert.ok(await atEnd(), 'follows again at the end');
    const text = await page.textContent(liveOut);
    assert.ok(text.length < 70_000, `bounded: ${text.length} characters in the card`);
    assert.match(text, /of earlier output not kept here/);
    assert.doesNotMatch(text, /row 001/, 'the oldest dropped');
    srv.release('end');
  } finally {
    await srv.close();
  }
});

test('a background command lost with its cluster node reads as such in the strip', async () => {
  const srv = await new Server().start();
  try {
    const s = await autoSession(srv);
    const { page } = await open();
    // The page's socket, passed through; inject() adds a frame the server never sent (owner_lost needs a cluster failover).
    let toPage;
    let lastId = '';
    await page.routeWebSocket(/\/stream/, (ws) => {
      const server = ws.connectToServer();
      toPage = ws;
      ws.onMessage((m) => server.send(m));
      server.onMessage((m) => {
        const f = JSON.parse(m);
        if (f.type === 'event') lastId = f.event.id;
        ws.send(m);
      });
    });
    await page.goto(`${srv.url}/#/s/${s.id}`);
    await live(page);
    await srv.submit(s.id, '/tool shell ' + JSON.stringify({ command: 'sleep 30', background: true }));
    await page.waitForSelector('.bg-command[data-running="true"]', { timeout: 20_000 });
    const id = await page.getAttribute('.bg-command', 'data-bg');
    await srv.idle(s.id);
    // An id just after the last one the page got (every later real id still sorts after it).
    const payload = { background_id: id, command: 'sleep 30', exit_code: null, reason: 'owner_lost', started_at: new Date().toISOString(), ended_at: new Date().toISOString(), duration_ms: 10, output_bytes: 0 };
    toPage.send(JSON.stringify({ type: 'event', event: { id: lastId + '0', session_id: s.id, turn_id: null, ts: new Date().toISOString(), type: 'tool.background_exited', actor: 'tool', payload } }));
    const row = `.bg-command[data-bg="${id}"]`;
    await page.waitForSelector(`${row}[data-running="false"]`, { state: 'attached', timeout: 10_000 }); // the strip folds once none runs
    assert.equal(await page.textContent(`${row} .badge`), 'lost (its cluster node failed)');
    assert.match(await page.getAttribute(`${row} .badge`, 'title'), /cluster mode: the node that ran it lost this session/);
  } finally {
    await srv.close();
  }
});
