// The dashboard in a real chromium against the real binary (issue 11's
// browser tests). Each test starts its own server with a temp home.
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { Server, browserSuite, live, pageMessages, storedText, traceRows, until } from './harness.mjs';

// One chromium for this file; no page may see a CSP violation or an error.
const open = browserSuite();

/** Every stored assistant/user message is on the page with the same text, once. */
async function assertPageEqualsStore(srv, sid, page, what) {
  const { messages } = await srv.messages(sid);
  const shown = await pageMessages(page);
  const ids = shown.map((m) => m.id);
  assert.equal(new Set(ids).size, ids.length, `${what}: a message is shown twice`);
  for (const m of messages) {
    if (m.role === 'tool') continue;
    const s = shown.find((x) => x.id === m.id);
    assert.ok(s, `${what}: stored message ${m.id} (${m.role}) is not on the page`);
    assert.equal(s.text, storedText(m), `${what}: text of ${m.id}`);
  }
}

test('a turn streams into the page and the final text equals the stored message', async () => {
  const srv = await new Server(['--demo-delay', '15ms']).start();
  try {
    const s = await srv.createSession();
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    await page.fill('#composer', 'what is in my workspace?');
    await page.keyboard.press('Enter');
    // The answer is seen while it streams, then completes.
    await page.waitForSelector('.msg-assistant.msg-streaming', { timeout: 15_000 });
    await page.waitForSelector('#turn-status.st-completed', { timeout: 30_000 });
    await page.waitForSelector('.tool .badge.st-completed');
    await assertPageEqualsStore(srv, s.id, page, 'after the turn');
    const shown = await pageMessages(page);
    assert.ok(shown.filter((m) => m.cls.includes('msg-assistant')).length >= 2, 'two assistant messages (tool round trip)');
    assert.ok(shown.every((m) => !m.cls.includes('msg-streaming')), 'nothing left streaming');
    // While a turn runs, Enter queues the message (a refusal would keep the text: conversation.test.mjs).
    await srv.submit(s.id, '/long 2000'); // 30 s: still running however slow the steps below
    await page.waitForSelector('#turn-status.st-in_flight');
    await page.fill('#composer', 'second message');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#queue .queued:has-text("second message")');
    assert.equal(await page.inputValue('#composer'), '');
  } finally {
    await srv.close();
  }
});

test('two pages show identical content; a cancel from one shows the canonical cancellation in both', async () => {
  const srv = await new Server(['--demo-delay', '10ms']).start();
  try {
    const s = await srv.createSession();
    const a = await open(`${srv.url}/#/s/${s.id}`);
    const b = await open(`${srv.url}/#/s/${s.id}`);
    await live(a.page);
    await live(b.page);
    await srv.submit(s.id, '/long 2000');
    await a.page.waitForSelector('.msg-assistant.msg-streaming');
    await b.page.waitForSelector('.msg-assistant.msg-streaming');
    await a.page.click('#cancel');
    for (const p of [a.page, b.page]) {
      await p.waitForSelector('#turn-status.st-cancelled', { timeout: 15_000 });
      await p.waitForSelector('.msg-assistant.msg-cancelled .badge:has-text("(cancelled)")');
    }
    await srv.idle(s.id);
    const ma = await pageMessages(a.page);
    const mb = await pageMessages(b.page);
    assert.deepEqual(ma, mb, 'both pages show the same messages');
    await assertPageEqualsStore(srv, s.id, a.page, 'page A');
    await assertPageEqualsStore(srv, s.id, b.page, 'page B');
    const { messages } = await srv.messages(s.id);
    assert.equal(messages.at(-1).status, 'cancelled', 'the stored message is cancelled too');
  } finally {
    await srv.close();
  }
});

test('a server restart shows the banner, then the page resumes with no duplicated or missing text', async () => {
  const srv = await new Server(['--demo-delay', '10ms']).start();
  try {
    const s = await srv.createSession();
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    await srv.submit(s.id, '/long 2000');
    await page.waitForSelector('.msg-assistant.msg-streaming');
    await srv.stop(); // cancels the turn (server_shutdown), flushes, closes 1001
    await page.waitForSelector('#reconnecting', { timeout: 15_000 });
    await srv.start();
    await live(page, 30_000);
    await page.waitForSelector('#reconnecting', { state: 'detached' });
    await page.waitForSelector('#notice:has-text("Reconnected")');
    await page.waitForSelector('#turn-status.st-cancelled');
    await assertPageEqualsStore(srv, s.id, page, 'after the restart');
    // And it keeps working: a new turn streams in.
    await srv.submit(s.id, '/echo back again');
    await page.waitForSelector('.text:has-text("back again")');
    await srv.idle(s.id);
    await page.waitForSelector('#turn-status.st-completed');
    await assertPageEqualsStore(srv, s.id, page, 'after a new turn');
  } finally {
    await srv.close();
  }
});

test('a page whose main thread is blocked is closed as too slow (1008) and recovers by replay', async () => {
  const srv = await new Server(['--demo-delay', '0s', '--client-queue', '64']).start();
  try {
    const s = await srv.createSession();
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    // Block the main thread, then stream a long turn: the socket is not
    // read, the server's queue for this page overflows.
    const blocked = page.evaluate(() => {
      const end = Date.now() + 6000;
      while (Date.now() < end);
    });
    await new Promise((r) => setTimeout(r, 300));
    await srv.submit(s.id, '/long 4000');
    await blocked;
    await srv.idle(s.id, 60_000);
    await until(async () => /metis_stream_slow_client_closes_total [1-9]/.test(await srv.metrics()), 15_000, 'a 1008 close');
    await live(page, 30_000);
    // Resumed by replay, or (when the ring no longer covered the gap)
    // resynced from a snapshot: either way idle with the whole message.
    await page.waitForSelector('#turn-status:not(.st-in_flight)', { timeout: 30_000 });
    await until(async () => (await pageMessages(page)).every((m) => !m.cls.includes('msg-streaming')), 15_000, 'message complete');
    await assertPageEqualsStore(srv, s.id, page, 'after the replay');
  } finally {
    await srv.close();
  }
});

test('a page opened mid-answer shows the answer from its start, then streams the rest; so does a worker opened mid-answer', async () => {
  const srv = await new Server(['--demo-delay', '10ms']).start();
  try {
    const s = await srv.createSession();
    /** The streaming answer's text on a page, as soon as it is live. */
    const answerOn = async (url) => {
      const { page } = await open(url);
      await live(page);
      const el = await page.waitForSelector('.msg-assistant.msg-streaming .text', { timeout: 15_000 });
      return { page, first: (await el.innerText()).replace(/\s+/g, ' ').trim() };
    };
    // The session itself.
    const turn = (await srv.submit(s.id, '/long 2000')).turn_id;
    const a = await answerOn(`${srv.url}/#/s/${s.id}`);
    await a.page.waitForSelector('.msg-assistant .text:has-text("Sentence 12 of 2000.")', { timeout: 15_000 });
    const b = await answerOn(`${srv.url}/#/s/${s.id}`);
    assert.ok(b.first.startsWith('Sentence 1 of 2000. Sentence 2 of 2000.'), `the page opened mid-answer first showed: ${b.first.slice(0, 80)}`);
    assert.equal(await b.page.$('.start-missing'), null, 'the answer is said to have lost its start');
    await srv.req('POST', `/sessions/${s.id}/turns/${turn}/cancel`, {});
    await srv.idle(s.id);
    await b.page.waitForSelector('#turn-status.st-cancelled');
    await assertPageEqualsStore(srv, s.id, b.page, 'the page opened mid-answer');
    // A worker's live stream, opened while its answer streams.
    await srv.submit(s.id, '/tool delegate {"task": "/long 2000", "model": "builtin:demo"}');
    const { page } = await open(`${srv.url}/#/s/${s.id}/workers`);
    await live(page);
    const worker = await (await page.waitForSelector('[data-worker]', { timeout: 15_000 })).getAttribute('data-worker');
    const w1 = await answerOn(`${srv.url}/#/s/${worker}`);
    await w1.page.waitForSelector('.msg-assistant .text:has-text("Sentence 12 of 2000.")', { timeout: 15_000 });
    const w2 = await answerOn(`${srv.url}/#/s/${worker}`);
    assert.ok(w2.first.startsWith('Sentence 1 of 2000. Sentence 2 of 2000.'), `the worker page opened mid-answer first showed: ${w2.first.slice(0, 80)}`);
    // Cancelling the planner's turn cancels the worker's.
    const planner = (await srv.req('GET', `/sessions/${s.id}`)).session.current_turn_id;
    await srv.req('POST', `/sessions/${s.id}/turns/${planner}/cancel`, {});
    await srv.idle(s.id);
    await w2.page.waitForSelector('#turn-status.st-cancelled', { timeout: 30_000 });
    await assertPageEqualsStore(srv, worker, w2.page, 'the worker page opened mid-answer');
  } finally {
    await srv.close();
  }
});

test('worker drill-down opens the worker live; the inline toggle interleaves worker events in id order', async () => {
  const srv = await new Server(['--demo-delay', '10ms']).start();
  try {
    const s = await srv.createSession();
    const { page } = await open(`${srv.url}/#/s/${s.id}/workers`);
    await live(page);
    await srv.submit(s.id, '/tool delegate {"task": "/long 300", "model": "builtin:demo"}');
    const card = await page.waitForSelector('[data-worker]', { timeout: 15_000 });
    const worker = await card.getAttribute('data-worker');
    await card.click();
    await page.waitForURL(`**/#/s/${worker}`);
    await live(page);
    // The worker's own stream: its text arrives live.
    await page.waitForSelector('.msg-assistant .text', { timeout: 15_000 });
    await page.waitForSelector('#back-to-planner');
    await srv.idle(s.id, 60_000);
    await page.waitForSelector('#turn-status.st-completed');
    await assertPageEqualsStore(srv, worker, page, 'worker page');
    await page.click('#back-to-planner');
    await page.waitForURL(`**/#/s/${s.id}/workers`);
    await page.waitForSelector('[data-worker] .badge.st-completed');

    // Inline: the planner's trace now carries the worker's events too.
    await page.click('#tab-trace');
    await live(page);
    await page.check('#inline-toggle');
    await live(page);
    const obs = await srv.observe(s.id, { event_types: null, actors: null, include_worker_sessions: true });
    await srv.submit(s.id, '/tool delegate {"task": "/echo inline worker says hi", "model": "builtin:demo"}');
    await srv.idle(s.id, 60_000);
    await until(() => obs.events.some((e) => e.type === 'turn.completed' && e.session_id === s.id), 15_000, 'observer');
    obs.close();
    await page.selectOption('#trace-family', 'catalog');
    await page.check('#trace-meta'); // the observer's list holds the bus's meta events, folded by default
    await page.uncheck('text=follow tail');
    const last = obs.events.filter((e) => e.type === 'turn.completed').at(-1).id;
    const rows = await until(async () => {
      const r = (await traceRows(page)).map((x) => x.id);
      return r.includes(last) ? r : null;
    }, 15_000, 'the turn in the trace');
    const want = obs.events.filter((e) => !e.type.includes('.delta') && !e.type.startsWith('message.') && !e.type.startsWith('tool.use_')).map((e) => e.id);
    const ids = rows.slice(rows.indexOf(want[0]), rows.indexOf(want.at(-1)) + 1);
    assert.deepEqual(ids, want, 'planner and worker catalog events, in id order');
    assert.ok(obs.events.some((e) => e.session_id !== s.id), 'the observer saw worker events');
    assert.deepEqual([...ids].sort(), ids, 'ids increase');
    // And the conversation marks the worker's messages with its session.
    await page.click('#tab-chat');
    await page.waitForSelector('.worker-tag');
  } finally {
    await srv.close();
  }
});

test('trace mode lists every event of a turn in id order', async () => {
  const srv = await new Server(['--demo-delay', '5ms']).start();
  try {
    const s = await srv.createSession();
    const { page } = await open(`${srv.url}/#/s/${s.id}/trace`);
    await live(page);
    // Every event: the deltas and the meta events are folded by default.
    await page.check('#trace-deltas');
    await page.check('#trace-meta');
    const obs = await srv.observe(s.id);
    await srv.submit(s.id, 'what is in my workspace?');
    await srv.idle(s.id);
    await until(() => obs.events.some((e) => e.type === 'turn.completed'), 15_000, 'observer');
    obs.close();
    const want = obs.events.map((e) => e.id);
    await until(async () => Number((await page.textContent('#trace-count')).split(' ')[0]) >= want.length, 15_000, 'all rows');
    // Collect the virtualized rows by scrolling through the list.
    const seen = (await traceRows(page)).map((x) => x.id);
    // (The observer's own unregistration may follow the turn.)
    const turn = seen.slice(seen.indexOf(want[0]), seen.indexOf(want.at(-1)) + 1);
    assert.deepEqual(turn, want, 'every event of the turn, in the order listed, equals what an independent subscriber saw');
    assert.deepEqual([...turn].sort(), turn, 'in id order');
    for (const t of ['turn.started', 'route.decided', 'llm.call_started', 'text.delta', 'tool.called', 'tool.completed', 'turn.completed']) {
      assert.ok(obs.events.some((e) => e.type === t), t);
    }
    // The JSON of an event opens beside the log.
    const started = obs.events.find((e) => e.type === 'turn.started').id;
    await page.fill('#trace-search', started);
    await page.click(`.trow[data-event-id="${started}"]`);
    const json = JSON.parse(await page.textContent('#event-json'));
    assert.equal(json.id, started);
    assert.equal(json.type, 'turn.started');
    // The waterfall drew the turn, its model calls and its tool.
    assert.ok(await page.$('.wf-row.wf-turn .wf-bar'));
    assert.equal((await page.$$('.wf-row.wf-llm')).length, 2);
    assert.ok(await page.$('.wf-row.wf-tool'));
    assert.ok(await page.$('.wf-row.wf-route .wf-mark'));
  } finally {
    await srv.close();
  }
});

test('trace mode opened after a turn lists its stored history in id order', async () => {
  const srv = await new Server(['--demo-delay', '2ms']).start();
  try {
    const s = await srv.createSession();
    const obs = await srv.observe(s.id);
    await srv.submit(s.id, 'what is in my workspace?');
    await srv.idle(s.id);
    await until(() => obs.events.some((e) => e.type === 'turn.completed'), 15_000, 'observer');
    obs.close();
    const { page } = await open(`${srv.url}/#/s/${s.id}/trace`);
    await live(page);
    await page.waitForSelector('#trace-history:has-text("history:")');
    await page.selectOption('#trace-family', 'catalog');
    const rows = (await traceRows(page)).map((x) => [x.id, x.type]);
    const catalog = (e) => !e.type.includes('.delta') && !e.type.startsWith('message.') && !e.type.startsWith('tool.use_') && !e.type.startsWith('bus.');
    const want = obs.events.filter(catalog).map((e) => e.id);
    const got = rows.filter(([, t]) => !t.startsWith('bus.')).map(([id]) => id);
    assert.equal(rows[0][1], 'session.created', 'the history starts with the session');
    assert.deepEqual(got.slice(got.indexOf(want[0]), got.indexOf(want.at(-1)) + 1), want, 'the turn, as an independent subscriber saw it live');
    assert.deepEqual([...rows.map(([id]) => id)].sort(), rows.map(([id]) => id), 'in id order');
  } finally {
    await srv.close();
  }
});

test("the sessions list shows the server's titles as they are and fetches no messages to guess them", async () => {
  const srv = await new Server().start();
  try {
    const titled = await srv.createSession();
    const untitled = await srv.createSession();
    const renamed = await srv.createSession();
    await srv.submit(titled.id, '/echo  list\n   me   by title');
    await srv.idle(titled.id);
    // A rename is kept as typed, quotes, braces and markdown included: the list must not clean it.
    const typed = 'fix "parse" in {config} **now**';
    await srv.req('PATCH', `/sessions/${renamed.id}`, { title: typed });
    const { page } = await open(undefined);
    const asked = [];
    page.on('request', (r) => {
      if (new URL(r.url()).pathname.endsWith('/messages')) asked.push(r.url());
    });
    await page.goto(`${srv.url}/#/`);
    const cell = (id) => page.textContent(`tr[data-session="${id}"] td.title a`);
    await page.waitForSelector(`tr[data-session="${titled.id}"]`);
    // The server derives the clean title (no slash command); the list shows the summary's title as is.
    const { sessions } = await srv.req('GET', '/sessions');
    const s = sessions.find((x) => x.id === titled.id);
    assert.equal(s.title, 'list me by title');
    await until(async () => (await cell(titled.id)) === s.title, 15_000, "the server's title");
    assert.equal(await cell(untitled.id), 'untitled');
    assert.equal(sessions.find((x) => x.id === renamed.id).title, typed);
    assert.equal(await cell(renamed.id), typed, 'the rename as typed');
    assert.ok(Date.parse(s.last_activity_at) > Date.parse(s.created_at), 'last activity after creation');
    // A poll or two later, still no message page was fetched for the list.
    await page.waitForResponse((r) => new URL(r.url()).pathname === '/sessions', { timeout: 15_000 });
    assert.deepEqual(asked, []);
  } finally {
    await srv.close();
  }
});

test('the page runs under a strict CSP, and a page from another origin cannot open the stream', async () => {
  const srv = await new Server().start();
  const other = http.createServer((_, res) => res.end('<!doctype html><title>elsewhere</title>'));
  await new Promise((r) => other.listen(0, '127.0.0.1', r));
  try {
    const s = await srv.createSession();
    const p = await open(`${srv.url}/#/s/${s.id}`);
    await live(p.page);
    // No inline script, no eval: both are refused by the policy.
    const probe = await p.page.evaluate(async () => {
      // Code run by the test driver itself is exempt from the policy;
      // code the page runs later (a timer) is not.
      const evalResult = await new Promise((r) =>
        setTimeout(() => {
          try {
            r(String((0, eval)('1 + 1')));
          } catch (e) {
            r(e.name);
          }
        }, 0),
      );
      const violations = [];
      document.addEventListener('securitypolicyviolation', (e) => violations.push(e.violatedDirective));
      const sc = document.createElement('script');
      sc.textContent = 'window.__inline = true';
      document.body.append(sc);
      await new Promise((r) => setTimeout(r, 100));
      return { evalResult, inline: window.__inline === true, violations };
    });
    assert.equal(probe.evalResult, 'EvalError', 'eval is blocked');
    assert.equal(probe.inline, false, 'an inline script does not run');
    assert.ok(probe.violations.some((d) => d.startsWith('script-src')), 'the inline script was reported');
    open.forget(p); // that page's violations were ours, on purpose
    await p.close();

    // Another origin, holding even a valid attach token, cannot connect.
    const info = await srv.req('GET', `/sessions/${s.id}`);
    const q = await open(`http://127.0.0.1:${other.address().port}/`);
    const result = await q.page.evaluate(
      async ({ base, wsUrl }) => {
        const ws = new WebSocket(wsUrl);
        const opened = await new Promise((r) => {
          ws.onopen = () => r(true);
          ws.onclose = () => r(false);
        });
        let fetched;
        try {
          await fetch(base + '/sessions');
          fetched = 'read';
        } catch {
          fetched = 'refused';
        }
        return { opened, fetched };
      },
      { base: srv.url, wsUrl: info.ws_url },
    );
    assert.deepEqual(result, { opened: false, fetched: 'refused' });
    open.forget(q); // the refused fetch logs a CORS error there, which is the point
    await q.close();
  } finally {
    other.close();
    await srv.close();
  }
});
