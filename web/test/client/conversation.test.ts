// Follow-ups and images through the TypeScript client against a real
// bin/metis (builtin:demo): queue, steer, cancel a queued turn, images
// sent and fetched back; and the View following the queue.

import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Api, ApiError, Follower, View, imageInput, sniffImage, type RawEnvelope } from '../../src/client/index';
import { startServer, until, type TestServer } from './server';

let srv: TestServer;
before(async () => {
  srv = await startServer(['--demo-delay', '20ms']);
});
after(async () => {
  await srv.stop();
});

// A 1×1 PNG.
const png = Uint8Array.from(atob('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=='), (c) => c.charCodeAt(0));

test('imageInput tells the type from the bytes, not the name', async () => {
  const img = await imageInput(new Blob([png], { type: 'image/jpeg' }));
  assert.equal(img.media_type, 'image/png');
  assert.equal(sniffImage(new TextEncoder().encode('GIF89a...')), 'image/gif');
  await assert.rejects(imageInput(new Blob([new TextEncoder().encode('not an image')])), /not a PNG/);
});

test('queue, cancel a queued turn, steer, and images through Api; the View follows the queue', async () => {
  const api = new Api({ baseUrl: srv.url });
  const s = await api.createSession({ workspace_path: srv.workspace });
  const f = new Follower({ api, sessionId: s.id });
  const events: RawEnvelope[] = [];
  f.onEvent((e) => events.push(e));
  f.start();
  try {
    await until(() => f.view.lastEventId !== '' || events.length > 0 || f.view.session !== undefined, 'subscribed');
    const running = await api.submitTurn(s.id, '/long 200');
    await until(() => events.some((e) => e.type === 'text.delta'), 'the turn to stream');
    await assert.rejects(api.submitTurn(s.id, 'busy'), (e: unknown) => e instanceof ApiError && e.status === 409 && e.code === 'turn_in_flight');

    const dropped = await api.queueTurn(s.id, '/echo dropped');
    assert.equal(dropped.queued, true);
    assert.equal(dropped.position, 1);
    const kept = await api.queueTurn(s.id, '/echo kept   with\nspaces', [await imageInput(new Blob([png]))]);
    assert.equal(kept.position, 2);
    await until(() => f.view.queued.length === 2, 'the view to list two queued turns');
    assert.equal(f.view.queued[1]!.preview, '/echo kept with spaces');
    assert.equal(f.view.queued[1]!.images, 1);

    assert.equal(await api.cancelTurn(s.id, dropped.turn_id), 'dequeued');
    await until(() => f.view.queued.length === 1, 'the cancelled turn to leave the queue');
    assert.equal(f.view.turn.id, running.turn_id);
    assert.equal(f.view.turn.status, 'in_flight');

    // The running turn makes no further model call: a steered message
    // becomes the next queued turn once it ends.
    const steered = await api.steerTurn(s.id, '/echo steered', { expectedTurnId: running.turn_id });
    assert.equal(steered.steered, true);
    assert.equal(steered.turn_id, running.turn_id);
    await assert.rejects(api.steerTurn(s.id, 'x', { expectedTurnId: 'turn_nope' }), (e: unknown) => e instanceof ApiError && e.code === 'turn_mismatch');

    await until(() => events.filter((e) => e.type === 'turn.completed').length === 3, 'three turns to complete');
    const started = events.filter((e) => e.type === 'turn.started').map((e) => e.turn_id);
    assert.deepEqual(started.slice(1), [kept.turn_id, started[2]]);
    assert.notEqual(started[2], running.turn_id);
    assert.equal(f.view.queued.length, 0);

    // The image: a reference in the message, the bytes by URL.
    const user = f.view.messages.find((m) => m.id === kept.message_id);
    const block = user?.blocks.find((b) => b.type === 'image');
    assert.equal(block?.media_type, 'image/png');
    assert.equal(block?.width, 1);
    const blob = await api.image(s.id, block!.sha256!);
    assert.equal(blob.type, 'image/png');
    assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), png);
    assert.equal(api.imageUrl(s.id, block!.sha256!), `${srv.url}/sessions/${s.id}/images/${block!.sha256}`);

    // A lying image is a 400 invalid_image, nothing stored.
    await assert.rejects(api.sendTurn(s.id, { content: 'x', images: [{ media_type: 'image/gif', data: btoa(String.fromCharCode(...png)) }] }),
      (e: unknown) => e instanceof ApiError && e.status === 400 && e.code === 'invalid_image' && /image\/gif/.test(e.message));
  } finally {
    f.stop();
  }
});

test('View: turn.queued, a queued turn cancelled, turn.started, turn.steered', () => {
  const v = new View();
  const env = (id: string, type: string, turn: string, payload: unknown): RawEnvelope =>
    ({ id, type, session_id: 's', turn_id: turn, ts: '2026-11-28T10:00:00.5Z', actor: 'user', payload }) as RawEnvelope;
  const msg = (id: string, text: string) => ({ id, role: 'user', content: [{ type: 'text', text }], status: 'complete' });
  v.applySnapshot({ type: 'snapshot', session: { id: 's', current_turn_id: 'turn_run', queued_turns: [] }, messages: [], snapshot_at_event_id: 'evt_1' } as never);
  v.apply(env('evt_2', 'turn.queued', 'turn_a', { user_message: msg('msg_a', 'a'), position: 1, source: 'queue' }));
  v.apply(env('evt_3', 'turn.queued', 'turn_b', { user_message: msg('msg_b', 'b'), position: 2, source: 'queue' }));
  assert.deepEqual(v.queued.map((q) => q.turn_id), ['turn_a', 'turn_b']);
  assert.equal(v.queued[0]!.queued_at, '2026-11-28T10:00:00.5Z');
  v.apply(env('evt_4', 'turn.cancelled', 'turn_a', { reason: 'user_cancel', phase: 'queued', cancelled_tool_use_ids: [] }));
  assert.deepEqual(v.queued.map((q) => q.turn_id), ['turn_b']);
  assert.equal(v.turn.status, 'in_flight');
  v.apply(env('evt_5', 'turn.steered', 'turn_run', { user_message: msg('msg_s', 'also'), call_index: 1 }));
  assert.equal(v.messages.at(-1)?.id, 'msg_s');
  assert.equal(v.messages.at(-1)?.turn_id, 'turn_run');
  v.apply(env('evt_6', 'turn.started', 'turn_b', { user_message: msg('msg_b', 'b') }));
  assert.equal(v.queued.length, 0);
  assert.equal((v.toJSON() as Record<string, unknown>)['queued_turns'], undefined);
});
