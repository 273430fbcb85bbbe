// The dashboard's browser benchmark (a script, not a test): a real
// chromium against bin/metis with builtin:demo.
//
//   go build -o bin/metis ./cmd/metis && node --experimental-websocket web/test/browser/bench.mjs [stream] [history] [trace]
//
// 1. A turn streaming about 1,000 text.delta/s (--demo-delay 500us; the
//    rate reached is reported):
//    time from a delta's arrival on the page's main thread (the socket's
//    message event) to the next paint (the first task after the next
//    animation frame), p50/p99; and the main thread's long tasks (>50 ms)
//    during the turn.
// 2. A session of 5,000 messages: first render (navigation start to the
//    first message in the DOM), paging all of it in by scrolling up, the
//    rows kept in the DOM, and frame times while scrolling through it.
// 3. A trace of 50,000 events: rows in the DOM, time to apply a filter,
//    frame times while scrolling.
import { Server, launch, live, openPage, until } from './harness.mjs';

const pct = (xs, p) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const r1 = (x) => Math.round(x * 10) / 10;

// Installed before the page's scripts: wraps WebSocket to time deltas,
// observes long tasks, records when the first message reaches the DOM.
const probe = () => {
  const Native = window.WebSocket;
  window.__lat = [];
  window.__deltas = 0;
  window.__measure = false;
  window.WebSocket = class extends Native {
    constructor(...a) {
      super(...a);
      this.addEventListener('message', (m) => {
        if (!window.__measure || typeof m.data !== 'string' || !m.data.includes('"text.delta"')) return;
        window.__deltas++;
        const t0 = performance.now();
        requestAnimationFrame(() => {
          const ch = new MessageChannel();
          ch.port1.onmessage = () => window.__lat.push(performance.now() - t0);
          ch.port2.postMessage(0);
        });
      });
    }
  };
  window.__long = [];
  new PerformanceObserver((l) => {
    for (const e of l.getEntries()) window.__long.push({ at: e.startTime, d: e.duration });
  }).observe({ type: 'longtask', buffered: true });
  window.__firstMessage = 0;
  new MutationObserver((_, obs) => {
    if (document.querySelector('[data-message-id]')) {
      window.__firstMessage = performance.now();
      obs.disconnect();
    }
  }).observe(document, { childList: true, subtree: true });
};

/** Frame times (ms) while scrolling a list from top to bottom in steps. */
const scrollFrames = async (sel) => {
  const box = document.querySelector(sel);
  const frames = [];
  box.scrollTop = 0;
  let last = await new Promise((r) => requestAnimationFrame(r));
  const step = box.clientHeight * 0.9;
  for (let i = 0; i < 400 && box.scrollTop + box.clientHeight < box.scrollHeight - 1; i++) {
    box.scrollTop += step;
    const now = await new Promise((r) => requestAnimationFrame(r));
    frames.push(now - last);
    last = now;
  }
  return frames;
};

// Optional: the names of the parts to run (stream, history, trace).
const only = process.argv.slice(2);
const run = (name) => only.length === 0 || only.includes(name);
const out = {};
const browser = await launch();
try {
  // 1. 1,000 deltas/s.
  if (run('stream')) {
    // --demo-delay 500us aims at ~1,000 deltas/s; BENCH_DEMO_DELAY overrides it.
    const srv = await new Server(['--demo-delay', process.env.BENCH_DEMO_DELAY || '500us', '--client-queue', '100000']).start();
    const s = await srv.createSession();
    const p = await openPage(browser);
    await p.page.addInitScript(probe);
    await p.page.goto(`${srv.url}/#/s/${s.id}`);
    await live(p.page);
    await p.page.evaluate(() => {
      window.__measure = true;
      window.__long.length = 0;
      window.__t0 = performance.now();
    });
    await srv.submit(s.id, '/long 2500');
    await srv.idle(s.id, 120_000);
    await p.page.waitForSelector('#turn-status.st-completed', { timeout: 120_000 });
    const r = await p.page.evaluate(() => ({
      lat: window.__lat,
      deltas: window.__deltas,
      secs: (performance.now() - window.__t0) / 1000,
      long: window.__long.filter((e) => e.at >= window.__t0),
    }));
    out.stream = {
      deltas: r.deltas,
      deltas_per_s: Math.round(r.deltas / r.secs),
      paint_p50_ms: r1(pct(r.lat, 50)),
      paint_p99_ms: r1(pct(r.lat, 99)),
      paint_max_ms: r1(Math.max(...r.lat)),
      long_tasks: r.long.length,
      long_task_total_ms: Math.round(r.long.reduce((a, e) => a + e.d, 0)),
      long_task_max_ms: Math.round(Math.max(0, ...r.long.map((e) => e.d))),
      seconds: r1(r.secs),
    };
    console.log('stream', out.stream);
    await p.close();
    await srv.close();
  }

  // 2. 5,000 messages.
  if (run('history')) {
    const srv = await new Server(['--demo-delay', '0s']).start();
    const s = await srv.createSession();
    const t = Date.now();
    for (let i = 0; i < 2500; i++) {
      for (;;) {
        try {
          await srv.submit(s.id, `/echo message ${i}: a short answer, long enough to wrap once or twice in the conversation view of the dashboard at 1280 pixels wide.`);
          break;
        } catch (e) {
          if (e.status !== 409) throw e;
          await new Promise((r) => setTimeout(r, 2));
        }
      }
    }
    await srv.idle(s.id, 120_000);
    const { messages } = await srv.req('GET', `/sessions/${s.id}/messages?limit=1`);
    console.log('seeded 5,000 messages in', Date.now() - t, 'ms; newest', messages[0].id);
    // The server's part: attach and subscribe with a snapshot, from Node.
    const a0 = Date.now();
    (await srv.observe(s.id)).close();
    const serverMs = Date.now() - a0;
    const p = await openPage(browser);
    await p.page.addInitScript(probe);
    await p.page.goto(`${srv.url}/#/s/${s.id}`);
    await live(p.page);
    await until(() => p.page.evaluate(() => window.__firstMessage > 0), 15_000, 'first message');
    const first = await p.page.evaluate(() => window.__firstMessage);
    const paged = await p.page.evaluate(async () => {
      const box = document.querySelector('.vlist.messages');
      const t0 = performance.now();
      for (let i = 0; i < 2000; i++) {
        box.scrollTop = 0;
        box.dispatchEvent(new Event('scroll'));
        await new Promise((r) => setTimeout(r, 20));
        if (!document.querySelector('.older')) break;
      }
      return { ms: performance.now() - t0, rows: document.querySelectorAll('.vrow').length };
    });
    const count = await p.page.evaluate(() => document.querySelector('.vlist.messages').scrollHeight);
    const frames = await p.page.evaluate(scrollFrames, '.vlist.messages');
    out.history = {
      messages: 5000,
      first_render_ms: Math.round(first),
      attach_and_snapshot_ms_from_node: serverMs,
      page_in_all_ms: Math.round(paged.ms),
      dom_rows: paged.rows,
      list_height_px: count,
      scroll_frame_p50_ms: r1(pct(frames, 50)),
      scroll_frame_p99_ms: r1(pct(frames, 99)),
    };
    console.log('history', out.history);
    await p.close();
    await srv.close();
  }

  // 3. 50,000 events in trace mode.
  if (run('trace')) {
    const srv = await new Server(['--demo-delay', '0s', '--client-queue', '200000', '--stream-ring', '200000']).start();
    const s = await srv.createSession();
    const p = await openPage(browser);
    await p.page.addInitScript(probe);
    await p.page.goto(`${srv.url}/#/s/${s.id}/trace`);
    await live(p.page);
    await srv.submit(s.id, '/long 13000');
    await srv.idle(s.id, 300_000);
    await p.page.waitForSelector('#turn-status:not(.st-in_flight)', { timeout: 300_000 });
    const count = async () => Number((await p.page.textContent('#trace-count')).split(' ')[2]);
    // Wait until the page has caught up (the count stops moving).
    let n = 0;
    for (let prev = -1; n !== prev; await new Promise((r) => setTimeout(r, 1000))) {
      prev = n;
      n = await count();
    }
    const gaps = await p.page.$$eval('.notice.warn', (els) => els.map((e) => e.textContent));
    const rows = await p.page.evaluate(() => document.querySelectorAll('.trow[data-event-id]').length);
    const f0 = Date.now();
    await p.page.selectOption('#trace-type', 'turn.completed');
    await p.page.waitForFunction(() => document.querySelector('#trace-count').textContent.startsWith('1 of'));
    const filterMs = Date.now() - f0;
    const s0 = Date.now();
    await p.page.fill('#trace-search', 'Sentence 12345 ');
    await p.page.selectOption('#trace-type', '');
    await p.page.waitForFunction(() => /^[1-9]\d* of/.test(document.querySelector('#trace-count').textContent));
    const searchMs = Date.now() - s0;
    await p.page.fill('#trace-search', '');
    await p.page.uncheck('text=follow tail');
    const frames = await p.page.evaluate(scrollFrames, '.vlist.events');
    out.trace = {
      events: n,
      resyncs: gaps,
      dom_rows: rows,
      filter_ms: filterMs,
      search_ms: searchMs,
      scroll_frame_p50_ms: r1(pct(frames, 50)),
      scroll_frame_p99_ms: r1(pct(frames, 99)),
    };
    console.log('trace', out.trace);
    await p.close();
    await srv.close();
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(out, null, 2));
