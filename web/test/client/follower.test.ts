// The Follower against a real bin/metis on loopback (builtin:demo).

import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Api, Follower, View, type ConnState, type StateInfo, type RawEnvelope } from '../../src/client/index';
import { startServer, until, type TestServer } from './server';

interface Recorder {
  states: { s: ConnState; info: StateInfo }[];
  events: RawEnvelope[];
}

function record(f: Follower): Recorder {
  const r: Recorder = { states: [], events: [] };
  f.onState((s, info) => r.states.push({ s, info }));
  f.onEvent((e) => r.events.push(e));
  return r;
}

/** The text of the stored assistant messages of a turn, from GET /sessions/{id}/messages. */
async function storedText(api: Api, sid: string, turnId: string): Promise<string> {
  const page = await api.messages(sid, { limit: 200 });
  return page.messages
    .filter((m) => m.turn_id === turnId && m.role === 'assistant')
    .map((m) => m.content.map((b) => (b.type === 'text' ? b.text : '')).join(''))
    .join('\n');
}

function viewText(v: View, turnId: string): string {
  return v.messages
    .filter((m) => m.turn_id === turnId && m.role === 'assistant')
    .map((m) => m.blocks.map((b) => (b.type === 'text' ? b.text : '')).join(''))
    .join('\n');
}

function turnDone(v: View, turnId: string): boolean {
  return v.turn.id === turnId && v.turn.status !== 'in_flight';
}

/** Each text.delta of msgId, in order: what the client rendered as it streamed. */
function streamedText(events: RawEnvelope[], msgId: string): string {
  return events
    .filter((e) => e.type === 'text.delta' && (e.payload as { message_id: string }).message_id === msgId)
    .map((e) => (e.payload as { text: string }).text)
    .join('');
}

function strictlyIncreasing(events: RawEnvelope[]): boolean {
  return events.every((e, i) => i === 0 || events[i - 1]!.id < e.id);
}

let srv: TestServer;
let api: Api;

before(async () => {
  srv = await startServer(['--demo-delay', '3ms']);
  api = new Api({ baseUrl: srv.url });
});

after(async () => {
  await srv.stop();
});

test('a turn streams into the view, and its final text equals the stored message', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  const f = new Follower({ api, sessionId: s.id });
  const r = record(f);
  let sawStreaming = false;
  f.onChange(() => {
    if (f.view.messages.some((m) => m.status === 'streaming' && m.blocks.some((b) => b.text !== ''))) sawStreaming = true;
  });
  f.start();
  try {
    await until(() => f.state === 'live', 'live');
    assert.equal(f.view.session?.id, s.id);
    const { turn_id } = await api.submitTurn(s.id, '/long 20');
    await until(() => turnDone(f.view, turn_id), 'the turn to end');
    assert.equal(f.view.turn.status, 'completed');
    assert.ok(sawStreaming, 'the view never held a partly streamed message');
    const stored = await storedText(api, s.id, turn_id);
    assert.ok(stored.length > 100, stored);
    assert.equal(viewText(f.view, turn_id), stored);
    assert.equal(f.view.mismatches, 0);
    assert.ok(strictlyIncreasing(r.events));
    assert.deepEqual(r.states.map((x) => x.s), ['connecting', 'live']);
  } finally {
    f.stop();
  }
  assert.equal(f.state, 'closed');
});

test('a forced disconnect mid-turn resumes with the cursor: no text duplicated or missing', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  const f = new Follower({ api, sessionId: s.id });
  const r = record(f);
  f.start();
  try {
    await until(() => f.state === 'live', 'live');
    const { turn_id } = await api.submitTurn(s.id, '/long 60');
    let dropped = false;
    f.onEvent((e) => {
      if (!dropped && e.type === 'text.delta' && r.events.filter((x) => x.type === 'text.delta').length >= 10) {
        dropped = true;
        f.reconnect();
      }
    });
    await until(() => turnDone(f.view, turn_id), 'the turn to end');
    assert.ok(dropped);
    const resumed = r.states.find((x) => x.s === 'live' && x.info.resumed);
    assert.ok(resumed, JSON.stringify(r.states));
    assert.equal(resumed.info.resynced, undefined, 'a resume within the ring needs no snapshot');
    assert.ok((resumed.info.replayed ?? -1) >= 0);
    assert.ok(strictlyIncreasing(r.events), 'an event was delivered twice or out of order');
    const stored = await storedText(api, s.id, turn_id);
    const msg = f.view.messages.find((m) => m.turn_id === turn_id && m.role === 'assistant')!;
    assert.equal(streamedText(r.events, msg.id), stored, 'the deltas seen across the drop are not exactly the stored text');
    assert.equal(viewText(f.view, turn_id), stored);
    assert.equal(f.view.mismatches, 0);
  } finally {
    f.stop();
  }
});

test('a follower that starts mid-answer gets it so far from the snapshot, then the rest: nothing missing, no mismatch', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  const early = new Follower({ api, sessionId: s.id });
  early.start();
  let late: Follower | undefined;
  try {
    await until(() => early.state === 'live', 'live');
    const { turn_id } = await api.submitTurn(s.id, '/long 60');
    await until(() => viewText(early.view, turn_id).includes('Sentence 5 of 60.'), 'a few sentences');
    late = new Follower({ api, sessionId: s.id });
    let first: string | undefined; // the answer as the late follower first held it
    late.onChange(() => {
      const m = late!.view.messages.find((x) => x.turn_id === turn_id && x.role === 'assistant');
      if (first === undefined && m) first = m.blocks.map((b) => b.text).join('');
    });
    late.start();
    await until(() => turnDone(late!.view, turn_id) && turnDone(early.view, turn_id), 'the turn to end');
    assert.ok(first?.startsWith('Sentence 1 of 60. Sentence 2 of 60.'), `the late follower first held ${JSON.stringify(first)}`);
    const stored = await storedText(api, s.id, turn_id);
    assert.equal(viewText(late.view, turn_id), stored);
    assert.equal(late.view.mismatches, 0, 'the snapshot and the deltas after it disagreed with the final content');
  } finally {
    early.stop();
    late?.stop();
  }
});

test('resync from a snapshot on cursor_expired', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  // A cursor from 1970: older than any retention.
  const f = new Follower({ api, sessionId: s.id, since: 'evt_00000000000000000000000000' });
  const r = record(f);
  f.start();
  try {
    await until(() => f.state === 'live', 'live');
    assert.equal(r.states.at(-1)?.info.resynced, 'cursor_expired');
    assert.equal(f.view.session?.id, s.id);
    assert.notEqual(f.view.lastEventId, 'evt_00000000000000000000000000');
  } finally {
    f.stop();
  }
});

test('an unknown session closes the follower for good', async () => {
  const f = new Follower({ api, sessionId: 'sess_01M9NOSUCHSESSION0000000000' });
  const r = record(f);
  f.start();
  await until(() => f.state === 'closed', 'closed');
  assert.equal(r.states.at(-1)?.info.error, 'session_not_found');
});

test('cancel sends the WebSocket cancel frame; the cancellation arrives as events', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  const f = new Follower({ api, sessionId: s.id });
  f.start();
  try {
    await until(() => f.state === 'live', 'live');
    assert.equal(f.cancel(), false, 'no turn in flight');
    const { turn_id } = await api.submitTurn(s.id, '/long 100000');
    await until(() => f.view.messages.some((m) => m.turn_id === turn_id && m.status === 'streaming'), 'streaming');
    assert.ok(f.cancel(undefined, 'test_cancel'));
    await until(() => turnDone(f.view, turn_id), 'the turn to end');
    assert.equal(f.view.turn.status, 'cancelled');
    assert.equal(f.view.turn.reason, 'test_cancel');
    const m = f.view.messages.find((x) => x.turn_id === turn_id && x.role === 'assistant')!;
    assert.equal(m.status, 'cancelled');
    assert.equal(m.stop_reason, 'cancelled');
  } finally {
    f.stop();
  }
});

test('setFilter re-subscribes with the new filter from a fresh snapshot', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  const f = new Follower({ api, sessionId: s.id });
  const r = record(f);
  f.start();
  try {
    await until(() => f.state === 'live', 'live');
    const { turn_id } = await api.submitTurn(s.id, '/tool delegate {"task":"/echo from the worker"}');
    await until(() => turnDone(f.view, turn_id), 'the turn to end');
    assert.ok(r.events.every((e) => e.session_id === s.id), 'worker events without include_worker_sessions');
    assert.equal(f.view.workers.size, 1);
    const lives = r.states.filter((x) => x.s === 'live').length;
    r.events.length = 0;
    f.setFilter({ preset: 'preset:chat', include_worker_sessions: true });
    await until(() => r.states.filter((x) => x.s === 'live').length > lives, 'live again');
    const again = r.states.filter((x) => x.s === 'live').at(-1)!;
    assert.equal(again.info.resumed, true);
    assert.equal(again.info.replayed, undefined, 'a fresh snapshot is not a replay');
    const { turn_id: t2 } = await api.submitTurn(s.id, '/tool delegate {"task":"/echo again"}');
    await until(() => turnDone(f.view, t2) || r.events.some((e) => e.session_id !== s.id && e.type === 'turn.completed'), 'worker events');
    await until(() => r.events.some((e) => e.session_id === s.id && e.type === 'turn.completed' && e.turn_id === t2), 'the turn to end');
    assert.ok(r.events.some((e) => e.session_id !== s.id), 'no worker event with include_worker_sessions');
    assert.ok(strictlyIncreasing(r.events));
    assert.equal(f.view.workers.size, 2);
  } finally {
    f.stop();
  }
});
