// The Api's checkpoint, revert and fork methods against a real bin/metis
// on loopback (builtin:demo; accept_edits so write_file runs unasked).

import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Api, ApiError, RevertTurn, RevertUndo, CodeNothingToRevert } from '../../src/client/index';
import { startServer, type TestServer } from './server';

let srv: TestServer;
let api: Api;

before(async () => {
  srv = await startServer(['--demo-delay', '1ms', '--default-mode', 'accept_edits']);
  api = new Api({ baseUrl: srv.url });
});

after(async () => {
  await srv.stop();
});

async function runTurn(sid: string, content: string): Promise<string> {
  const { turn_id } = await api.submitTurn(sid, content);
  const deadline = Date.now() + 30_000;
  while ((await api.getSession(sid)).session.current_turn_id !== null) {
    if (Date.now() > deadline) throw new Error(`turn ${turn_id} did not end`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return turn_id;
}

test('listTurns, turnChanges, revertTurn, restoreCheckpoint and fork reach the server', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  const chat = await runTurn(s.id, 'hello');
  const write = await runTurn(s.id, '/tool write_file {"path":"ts.txt","content":"from ts\\n"}');
  const file = join(srv.workspace, 'ts.txt');
  assert.equal(readFileSync(file, 'utf8'), 'from ts\n');

  const list = await api.listTurns(s.id);
  assert.equal(list.checkpoints.enabled, true);
  assert.deepEqual(list.turns.map((t) => t.turn_id), [chat, write]);
  const [first, second] = list.turns;
  assert.equal(first!.revertible, false);
  assert.equal(second!.revertible, true);
  assert.equal(second!.changes?.files[0]?.path, 'ts.txt');
  assert.equal(second!.changes?.files[0]?.status, 'added');

  const older = await api.listTurns(s.id, { limit: 1 });
  assert.equal(older.has_more, true);
  assert.equal(older.turns[0]!.turn_id, write);

  const diff = await api.turnChanges(s.id, write);
  assert.match(diff.files[0]!.diff, /\+from ts/);

  await assert.rejects(api.revertTurn(s.id, chat), (e: unknown) => e instanceof ApiError && e.status === 409 && e.code === CodeNothingToRevert);
  const rev = await api.revertTurn(s.id, write);
  assert.equal(rev.trigger, RevertTurn);
  assert.deepEqual(rev.removed, ['ts.txt']);
  assert.ok(rev.warning.length > 0);
  assert.equal(existsSync(file), false);

  const undo = await api.restoreCheckpoint(s.id, rev.undo_checkpoint_id);
  assert.equal(undo.trigger, RevertUndo);
  assert.equal(readFileSync(file, 'utf8'), 'from ts\n');

  const msgs = await api.messages(s.id, { limit: 200 });
  const firstTurnEnd = msgs.messages.filter((m) => m.turn_id === chat).at(-1)!;
  const f = await api.fork(s.id, { message_id: firstTurnEnd.id });
  assert.deepEqual(f.forked_from, { session_id: s.id, message_id: firstTurnEnd.id });
  const forked = await api.messages(f.id, { limit: 200 });
  assert.equal(forked.messages.length, msgs.messages.filter((m) => m.turn_id === chat).length);
  await assert.rejects(api.fork(s.id, { message_id: 'msg_nope' }), (e: unknown) => e instanceof ApiError && e.status === 404);
});
