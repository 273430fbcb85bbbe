// The Follower's recoveries against a real bin/metis with small limits:
// a 1008 close resumes at once, a streaming gap and replay_too_large
// resync from a snapshot.

import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Api, Follower, ReasonStorageFailure, type ConnState, type StateInfo } from '../../src/client/index';
import { startServer, until, type TestServer } from './server';

let srv: TestServer;
let api: Api;

before(async () => {
  srv = await startServer(['--demo-delay', '2ms', '--stream-ring', '4', '--replay-limit', '20',
    '--ping-interval', '300ms', '--ping-misses', '2']);
  api = new Api({ baseUrl: srv.url });
});

after(async () => {
  await srv.stop();
});

function states(f: Follower): { s: ConnState; info: StateInfo }[] {
  const out: { s: ConnState; info: StateInfo }[] = [];
  f.onState((s, info) => out.push({ s, info }));
  return out;
}

async function idle(sid: string): Promise<void> {
  for (;;) {
    const a = await api.attach(sid);
    if (a.session.current_turn_id === null) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('a 1008 close (heartbeat timeout) resumes at once, with the cursor', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  let sockets = 0;
  let pongs = 0; // sent on the second connection
  // The first connection never answers the server's pings.
  class DeafFirst extends WebSocket {
    private readonly deaf = ++sockets === 1;
    override send(data: Parameters<WebSocket["send"]>[0]): void {
      const pong = typeof data === 'string' && data.includes('"pong"');
      if (this.deaf && pong) return;
      if (pong) pongs++;
      super.send(data);
    }
  }
  // A backoff of a minute: only an immediate resume lets the test finish.
  const f = new Follower({ api, sessionId: s.id, WebSocket: DeafFirst, minBackoffMs: 60_000, maxBackoffMs: 60_000 });
  const st = states(f);
  f.start();
  try {
    await until(() => st.some((x) => x.s === 'live' && x.info.resumed), 'a resumed stream');
    const drop = st.find((x) => x.s === 'reconnecting')!;
    assert.equal(drop.info.closeCode, 1008);
    assert.equal(drop.info.closeReason, 'heartbeat_timeout');
    assert.equal(drop.info.delayMs, 0);
    const resumed = st.find((x) => x.s === 'live' && x.info.resumed)!;
    assert.equal(resumed.info.resynced, undefined, 'resumed with the cursor, not a snapshot');
    assert.equal(sockets, 2);
    const { turn_id } = await api.submitTurn(s.id, '/echo still here');
    await until(() => f.view.turn.id === turn_id && f.view.turn.status === 'completed', 'the turn');
    // The second connection answers every ping (two misses would close it): it outlives several.
    await until(() => pongs >= 3, 'three pings answered');
    assert.equal(sockets, 2);
    assert.equal(st.filter((x) => x.s === 'reconnecting').length, 1);
  } finally {
    f.stop();
  }
});

test('a 1008 storage_failure close resumes at once, with the cursor', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  let sockets = 0;
  let first: StorageFailing | undefined;
  // The server closes live clients with 1008 storage_failure when an event
  // could not be stored; a full disk is not something to cause here, so
  // the first connection delivers that close itself, as the server sends it.
  class StorageFailing extends WebSocket {
    constructor(url: string | URL, protocols?: string | string[]) {
      super(url, protocols);
      if (++sockets === 1) first = this;
    }
    fail(): void {
      const ev = { code: 1008, reason: JSON.stringify(ReasonStorageFailure), wasClean: true } as CloseEvent;
      this.onclose?.call(this, ev);
      super.close();
    }
  }
  // A backoff of a minute: only an immediate resume lets the test finish.
  const f = new Follower({ api, sessionId: s.id, WebSocket: StorageFailing, minBackoffMs: 60_000, maxBackoffMs: 60_000 });
  const st = states(f);
  f.start();
  try {
    await until(() => st.some((x) => x.s === 'live'), 'a live stream');
    const { turn_id: before } = await api.submitTurn(s.id, '/echo before');
    await until(() => f.view.turn.id === before && f.view.turn.status === 'completed', 'the first turn');
    first!.fail();
    await until(() => st.some((x) => x.s === 'live' && x.info.resumed), 'a resumed stream');
    const drop = st.find((x) => x.s === 'reconnecting')!;
    assert.equal(drop.info.closeCode, 1008);
    assert.equal(drop.info.closeReason, 'storage_failure');
    assert.equal(drop.info.delayMs, 0);
    const resumed = st.find((x) => x.s === 'live' && x.info.resumed)!;
    assert.equal(resumed.info.resynced, undefined, 'resumed with the cursor, not a snapshot');
    assert.equal(sockets, 2);
    const { turn_id } = await api.submitTurn(s.id, '/echo after');
    await until(() => f.view.turn.id === turn_id && f.view.turn.status === 'completed', 'the turn after');
  } finally {
    f.stop();
  }
});

test('a streaming gap on resume rebuilds the view from a snapshot', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  let attaches = 0;
  let release: () => void = () => {};
  const held = new Promise<void>((r) => (release = r));
  // The second attach waits until the turn is over: the server's ring
  // (4 streaming events) no longer holds the deltas after the cursor.
  const slowFetch: typeof fetch = async (input, init) => {
    if (String(input).endsWith('/sessions/' + s.id) && (init?.method ?? 'GET') === 'GET' && ++attaches === 2) await held;
    return fetch(input, init);
  };
  const f = new Follower({ api: new Api({ baseUrl: srv.url, fetch: slowFetch }), sessionId: s.id, minBackoffMs: 10, maxBackoffMs: 50 });
  const st = states(f);
  f.start();
  try {
    await until(() => f.state === 'live', 'live');
    const { turn_id } = await api.submitTurn(s.id, '/long 40');
    let deltas = 0;
    let dropped = false;
    f.onEvent((e) => {
      if (e.type === 'text.delta' && ++deltas === 5 && !dropped) {
        dropped = true;
        f.reconnect();
      }
    });
    await until(() => dropped, 'the drop');
    await idle(s.id);
    release();
    await until(() => st.some((x) => x.s === 'live' && x.info.resynced === 'streaming_gap'), 'a resync');
    // The snapshot was taken after the turn: the view is idle, its messages complete.
    assert.equal(f.view.turn.status, 'idle');
    const page = await api.messages(s.id);
    const stored = page.messages.find((m) => m.turn_id === turn_id && m.role === 'assistant')!;
    const got = f.view.message(stored.id)!;
    assert.equal(got.status, 'complete');
    assert.deepEqual(got.blocks.map((b) => b.text), stored.content.map((b) => (b.type === 'text' ? b.text : '')));
  } finally {
    f.stop();
  }
});

test('replay_too_large resyncs from a snapshot', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  const first = new Follower({ api, sessionId: s.id });
  first.start();
  await until(() => first.state === 'live', 'live');
  const since = first.view.lastEventId;
  first.stop();
  for (let i = 0; i < 3; i++) {
    await api.submitTurn(s.id, '/tool list_dir {"path":"."}');
    await idle(s.id);
  }
  const f = new Follower({ api, sessionId: s.id, since });
  const st = states(f);
  f.start();
  try {
    await until(() => f.state === 'live', 'live');
    assert.equal(st.at(-1)?.info.resynced, 'replay_too_large');
    assert.equal(f.view.session?.turn_count, 3);
    assert.ok(f.view.messages.length >= 9, `${f.view.messages.length} messages`);
  } finally {
    f.stop();
  }
});
