// The conformance traces driven through the whole Follower, connection
// by connection, over a scripted WebSocket: each reconnect must send the
// subscribe the recorded client sent (the same since, or a snapshot after
// a streaming gap), pings are answered, unknown frames skipped, and the
// final view equals expected.json.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Api, Follower, backoffDelay, wireFilter, ApiError } from '../../src/client/index';
import { cases, casesDir, comparable, frames } from './helpers';
import { until } from './server';

/** A WebSocket the test scripts: it records what the client sends and delivers what the test says. */
class ScriptedSocket {
  static all: ScriptedSocket[] = [];
  readyState = 0;
  sent: Record<string, unknown>[] = [];
  closedByClient = false;
  onopen: ((e: unknown) => void) | null = null;
  onmessage: ((e: { data: unknown }) => void) | null = null;
  onclose: ((e: { code: number; reason: string }) => void) | null = null;
  onerror: ((e: unknown) => void) | null = null;
  constructor(readonly url: string) {
    ScriptedSocket.all.push(this);
  }
  send(data: string): void {
    this.sent.push(JSON.parse(data) as Record<string, unknown>);
  }
  close(): void {
    this.closedByClient = true;
    this.readyState = 3;
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.({});
  }
  deliver(frame: unknown): void {
    this.onmessage?.({ data: typeof frame === 'string' ? frame : JSON.stringify(frame) });
  }
  drop(code = 1006, reason = ''): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
}

function fakeApi(sessionId: string, status = 200): Api {
  const fetchStub: typeof fetch = async (input) => {
    const path = new URL(String(input)).pathname;
    if (status !== 200) {
      return new Response(JSON.stringify({ error: { code: 'session_not_found', message: 'no such session' } }), { status });
    }
    assert.equal(path, `/sessions/${sessionId}`);
    return new Response(JSON.stringify({ session_id: sessionId, active_model: 'builtin:demo', attach_token: 'atk_x',
      ws_url: `ws://127.0.0.1:1/sessions/${sessionId}/stream?attach=atk_x`, session: {} }), { status: 200 });
  };
  return new Api({ baseUrl: 'http://127.0.0.1:1', fetch: fetchStub });
}

/** Splits a trace at its _connection markers. */
function connections(fs: Record<string, unknown>[]): Record<string, unknown>[][] {
  const out: Record<string, unknown>[][] = [];
  for (const f of fs) {
    if (f['type'] === '_connection') out.push([]);
    else out.at(-1)!.push(f);
  }
  return out;
}

for (const name of cases) {
  test(`follower conformance: ${name}`, async () => {
    ScriptedSocket.all = [];
    const conns = connections(frames(name));
    const firstAck = conns[0]!.find((f) => f['type'] === 'subscribe_ack') as { resolved_filter: { include_worker_sessions: boolean } };
    const f = new Follower({
      api: fakeApi('sess_x'), sessionId: 'sess_x', WebSocket: ScriptedSocket as unknown as typeof WebSocket,
      filter: { include_worker_sessions: firstAck.resolved_filter.include_worker_sessions },
      minBackoffMs: 1, maxBackoffMs: 2, idleTimeoutMs: 0,
    });
    const states: string[] = [];
    f.onState((s) => states.push(s));
    f.start();
    try {
      for (const [i, frs] of conns.entries()) {
        await until(() => ScriptedSocket.all.length > i, `connection ${i + 1}`, 5000);
        const ws = ScriptedSocket.all[i]!;
        ws.open();
        let acks = 0;
        for (const fr of frs) {
          if (ws.closedByClient) break; // the client left (a streaming gap): the rest was never read
          if (fr['type'] === 'subscribe_ack' || fr['type'] === 'subscribe_error') {
            // The client's subscribe on this connection is what the recorded client sent.
            const sub = ws.sent.filter((s) => s['type'] === 'subscribe')[acks++]!;
            assert.ok(sub, `no subscribe before frame ${JSON.stringify(fr).slice(0, 80)}`);
            if (fr['type'] === 'subscribe_ack') {
              assert.equal(sub['snapshot'], fr['snapshot'], `connection ${i + 1}: snapshot`);
              assert.equal(sub['since'], fr['snapshot'] ? null : fr['since'], `connection ${i + 1}: since`);
            }
          }
          ws.deliver(fr);
          if (fr['type'] === 'ping') assert.deepEqual(ws.sent.at(-1), { type: 'pong', nonce: fr['nonce'] });
        }
        if (i < conns.length - 1 && !ws.closedByClient) ws.drop();
      }
      const want = JSON.parse(readFileSync(join(casesDir, name, 'expected.json'), 'utf8')) as unknown;
      assert.deepStrictEqual(comparable(f.view.toJSON()), comparable(want));
      assert.equal(f.state, 'live');
    } finally {
      f.stop();
    }
  });
}

test('follower: not-JSON, non-object and unknown frames are skipped; the stream goes on', async () => {
  ScriptedSocket.all = [];
  const f = new Follower({ api: fakeApi('s'), sessionId: 's', WebSocket: ScriptedSocket as unknown as typeof WebSocket, idleTimeoutMs: 0 });
  f.start();
  try {
    await until(() => ScriptedSocket.all.length === 1, 'a socket', 5000);
    const ws = ScriptedSocket.all[0]!;
    ws.open();
    assert.deepEqual(ws.sent[0], { type: 'subscribe', filter: 'preset:chat', since: null, snapshot: true });
    ws.deliver({ type: 'subscribe_ack', resolved_filter: {}, since: null, snapshot: true, replay_event_count: 0, streaming_gap: false, seam_event_id: 'evt_1' });
    ws.deliver({ type: 'snapshot', session: { id: 's' }, messages: [], has_more_messages: false, snapshot_at_event_id: 'evt_1' });
    assert.equal(f.state, 'live');
    for (const junk of ['not json', '[1,2]', 'null', '{"type":"event"}', '{"type":"event","event":{"id":5}}', '{"type":"from_the_future"}']) {
      ws.deliver(junk);
    }
    ws.deliver({ type: 'event', event: { id: 'evt_2', type: 'turn.started', session_id: 's', turn_id: 't', ts: '', actor: 'user',
      payload: { user_message: { id: 'm', role: 'user', content: [{ type: 'text', text: 'hi' }], status: 'complete' } } } });
    assert.equal(f.view.turn.status, 'in_flight');
    assert.equal(f.view.lastEventId, 'evt_2');
    assert.equal(f.cancel(), true);
    assert.deepEqual(ws.sent.at(-1), { type: 'cancel', turn_id: 't' });
    assert.equal(ScriptedSocket.all.length, 1);
    // A drop resumes with the cursor.
    ws.drop(1001, '{"code":"server_shutdown","message":"bye"}');
    assert.equal(f.state, 'reconnecting');
    assert.equal(f.cancel('t'), false, 'no cancel while not live');
    await until(() => ScriptedSocket.all.length === 2, 'a second socket', 5000);
    ScriptedSocket.all[1]!.open();
    assert.deepEqual(ScriptedSocket.all[1]!.sent[0], { type: 'subscribe', filter: 'preset:chat', since: 'evt_2', snapshot: false });
  } finally {
    f.stop();
  }
});

test('follower: invalid_filter and an unknown session close it for good', async () => {
  ScriptedSocket.all = [];
  const f = new Follower({ api: fakeApi('s'), sessionId: 's', WebSocket: ScriptedSocket as unknown as typeof WebSocket,
    filter: { types: ['nope'] }, idleTimeoutMs: 0 });
  const seen: { s: string; error?: string }[] = [];
  f.onState((s, info) => seen.push({ s, ...(info.error !== undefined ? { error: info.error } : {}) }));
  f.start();
  await until(() => ScriptedSocket.all.length === 1, 'a socket', 5000);
  const ws = ScriptedSocket.all[0]!;
  ws.open();
  assert.deepEqual(ws.sent[0]!['filter'], { event_types: ['nope'], actors: null, include_worker_sessions: false });
  ws.deliver({ type: 'subscribe_error', code: 'invalid_filter', message: 'unknown event type', offending: 'nope' });
  assert.equal(f.state, 'closed');
  assert.equal(seen.at(-1)?.error, 'invalid_filter: unknown event type');
  assert.ok(ws.closedByClient);

  const g = new Follower({ api: fakeApi('s', 404), sessionId: 's', WebSocket: ScriptedSocket as unknown as typeof WebSocket, idleTimeoutMs: 0 });
  g.start();
  await until(() => g.state === 'closed', 'closed', 5000);
});

test('follower: a connection silent for longer than idleTimeoutMs is dropped and resumed', async () => {
  ScriptedSocket.all = [];
  const f = new Follower({ api: fakeApi('s'), sessionId: 's', WebSocket: ScriptedSocket as unknown as typeof WebSocket,
    idleTimeoutMs: 40, minBackoffMs: 1, maxBackoffMs: 2 });
  f.start();
  try {
    await until(() => ScriptedSocket.all.length >= 2, 'a second socket after the silence', 10_000);
    assert.ok(ScriptedSocket.all[0]!.closedByClient);
  } finally {
    f.stop();
  }
});

test('backoffDelay: exponential, capped, jittered between half and all', () => {
  assert.equal(backoffDelay(1, 100, 5000, () => 0), 50);
  assert.equal(backoffDelay(1, 100, 5000, () => 0.999999), 99.99995);
  assert.equal(backoffDelay(3, 100, 5000, () => 0), 200);
  assert.equal(backoffDelay(10, 100, 5000, () => 0), 2500);
  assert.equal(backoffDelay(1000, 100, 5000, () => 1), 5000);
  for (let a = 1; a < 40; a++) {
    const d = backoffDelay(a, 100, 5000);
    assert.ok(d >= 50 && d <= 5000, `${a}: ${d}`);
  }
});

test('wireFilter: a preset name when it says it all, else the explicit list', () => {
  assert.equal(wireFilter({}), 'preset:chat');
  assert.equal(wireFilter({ preset: 'preset:full' }), 'preset:full');
  const w = wireFilter({ preset: 'preset:chat', include_worker_sessions: true });
  assert.ok(typeof w === 'object' && w.include_worker_sessions && w.event_types!.includes('text.delta') && !w.event_types!.includes('session.created'));
  assert.deepEqual(wireFilter({ types: ['turn.started'], actors: ['user'] }), { event_types: ['turn.started'], actors: ['user'], include_worker_sessions: false });
});

test('Api: error answers become ApiError with status and code; ws_url follows the scheme', async () => {
  const api = new Api({ baseUrl: 'https://example.test/', fetch: async () =>
    new Response('{"error":{"code":"turn_in_flight","message":"a turn is running"}}', { status: 409 }) });
  await assert.rejects(api.submitTurn('s', 'x'), (e: unknown) => e instanceof ApiError && e.status === 409 && e.code === 'turn_in_flight' && e.message === 'a turn is running');
  const down = new Api({ baseUrl: 'http://127.0.0.1:1', fetch: async () => { throw new TypeError('fetch failed'); } });
  await assert.rejects(down.listSessions(), (e: unknown) => e instanceof ApiError && e.status === 0 && e.code === 'network');
  const html = new Api({ baseUrl: 'http://h', fetch: async () => new Response('<html>', { status: 502 }) });
  await assert.rejects(html.listSessions(), (e: unknown) => e instanceof ApiError && e.status === 502 && e.code === '');
  assert.equal(api.streamUrl('ws://example.test/sessions/s/stream?attach=a'), 'wss://example.test/sessions/s/stream?attach=a');
  assert.equal(new Api({ baseUrl: 'http://h:1' }).streamUrl('/sessions/s/stream?attach=a'), 'ws://h:1/sessions/s/stream?attach=a');
});

test('Api.listSessions walks every page of GET /sessions; a cursor that does not advance is an error', async () => {
  const seen: string[] = [];
  const pages: Record<string, string> = {
    '': '{"sessions":[{"id":"s3"},{"id":"s2"}],"has_more":true,"next":"c1"}',
    c1: '{"sessions":[{"id":"s1"}],"has_more":false}',
  };
  const api = new Api({ baseUrl: 'http://h', fetch: async (input: RequestInfo | URL) => {
    const u = new URL(String(input));
    seen.push(u.search);
    return new Response(pages[u.searchParams.get('before') ?? ''] ?? '{}', { status: 200 });
  } });
  const all = await api.listSessions();
  assert.deepEqual(all.map((s) => s.id), ['s3', 's2', 's1']);
  assert.deepEqual(seen, ['?limit=1000', '?limit=1000&before=c1']);
  const stuck = new Api({ baseUrl: 'http://h', fetch: async () =>
    new Response('{"sessions":[],"has_more":true,"next":""}', { status: 200 }) });
  await assert.rejects(stuck.listSessions(), (e: unknown) => e instanceof ApiError && e.code === 'invalid_response');
});

test('follower: thousands of random frames never throw and never stop the stream', async () => {
  ScriptedSocket.all = [];
  const f = new Follower({ api: fakeApi('s'), sessionId: 's', WebSocket: ScriptedSocket as unknown as typeof WebSocket, idleTimeoutMs: 0 });
  f.start();
  try {
    await until(() => ScriptedSocket.all.length === 1, 'a socket', 5000);
    const ws = ScriptedSocket.all[0]!;
    ws.open();
    ws.deliver({ type: 'subscribe_ack', resolved_filter: {}, since: null, snapshot: true, replay_event_count: 0, streaming_gap: false, seam_event_id: 'evt_1' });
    ws.deliver({ type: 'snapshot', session: { id: 's' }, messages: [], has_more_messages: false, snapshot_at_event_id: 'evt_1' });
    let seed = 42;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const values: unknown[] = [null, 0, -1, 1.5, 4096, '', 'x', true, [], {}, [null], { type: 'text', text: 5 }, 'evt_9'];
    const types = ['event', 'ping', 'pong', 'error', 'hello', 5, null];
    const evTypes = ['text.delta', 'message.start', 'message.complete', 'tool.called', 'turn.started', 'turn.cancelled', 'delegate.started', 'nope'];
    const pick = <T>(a: T[]): T => a[Math.floor(rand() * a.length)]!;
    for (let i = 0; i < 3000; i++) {
      const payload: Record<string, unknown> = {};
      for (const k of ['message_id', 'content_block_index', 'text', 'final_content', 'user_message', 'tool_use_id', 'usage', 'worker_session_id']) {
        if (rand() < 0.5) payload[k] = pick(values);
      }
      const id = `evt_2${String(i).padStart(8, '0')}`;
      ws.deliver({ type: pick(types), nonce: pick(values),
        event: rand() < 0.9 ? { id, type: pick(evTypes), session_id: 's', turn_id: pick(['t', null]), ts: '', actor: 'model', payload } : pick(values) });
    }
    assert.equal(f.state, 'live');
    assert.ok(JSON.stringify(f.view.toJSON()).length > 0);
    assert.ok(f.view.lastEventId > 'evt_2', f.view.lastEventId);
    assert.ok(f.view.messages.length > 0 && f.view.skipped > 0);
  } finally {
    f.stop();
  }
});
