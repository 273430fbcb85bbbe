// The client's permission, context and session-management parts against
// a real bin/metis on loopback (builtin:demo): pending approvals in the
// view and Api.approve (first answer wins, a late one gets the winner),
// the mode in the view, edit diffs on tool calls, turn totals, rename,
// archive, delete, compact and the model list.

import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Api, Follower, View, TOOL_AWAITING_APPROVAL } from '../../src/client/index';
import { startServer, until, type TestServer } from './server';

let srv: TestServer;
let api: Api;

before(async () => {
  srv = await startServer();
  api = new Api({ baseUrl: srv.url });
});
after(async () => {
  await srv.stop();
});

function follow(sid: string): Follower {
  const f = new Follower({ api, sessionId: sid, filter: { preset: 'preset:full' }, view: new View() });
  f.start();
  return f;
}

test('a waiting approval is in the view; the first answer wins and a late one learns the winner', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  const f = follow(s.id);
  try {
    await until(() => f.state === 'live', 'live');
    assert.equal(f.view.mode, 'default');
    const { turn_id } = await api.submitTurn(s.id, '/tool shell {"command":"echo approved"}');
    await until(() => f.view.pendingApprovals.length === 1, 'approval.requested');
    const pa = f.view.pendingApprovals[0]!;
    assert.equal(pa.tool_name, 'shell');
    assert.equal(pa.session_id, s.id);
    assert.equal(f.view.tools.get(pa.tool_use_id)?.status, TOOL_AWAITING_APPROVAL);
    const won = await api.approve(s.id, pa.approval_id, { decision: 'allow', scope: 'once' });
    assert.equal(won.won, true);
    assert.equal(won.decision, 'allow');
    const late = await api.approve(s.id, pa.approval_id, { decision: 'deny', reason: 'too late' });
    assert.equal(late.won, false);
    assert.equal(late.decision, 'allow');
    await until(() => f.view.turn.id === turn_id && f.view.turn.status !== 'in_flight', 'turn end');
    assert.equal(f.view.pendingApprovals.length, 0);
    assert.equal(f.view.tools.get(pa.tool_use_id)?.status, 'completed');
    const t = f.view.turns.get(turn_id);
    assert.ok(t && t.status === 'completed' && t.llm_calls >= 1 && t.started_at !== '', JSON.stringify(t));
  } finally {
    f.stop();
  }
});

test('a snapshot carries the waiting approvals to a client that attaches later; a deny ends the call', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  const { turn_id } = await api.submitTurn(s.id, '/tool shell {"command":"echo later"}');
  const first = follow(s.id);
  await until(() => first.view.pendingApprovals.length === 1, 'approval.requested');
  first.stop();
  const f = follow(s.id);
  try {
    await until(() => f.state === 'live', 'live');
    assert.equal(f.view.pendingApprovals.length, 1, 'from the snapshot');
    const pa = f.view.pendingApprovals[0]!;
    const r = await api.approve(s.id, pa.approval_id, { decision: 'deny', reason: 'not now' });
    assert.equal(r.won, true);
    await until(() => f.view.turn.id === turn_id && f.view.turn.status !== 'in_flight', 'turn end');
    assert.equal(f.view.pendingApprovals.length, 0);
  } finally {
    f.stop();
  }
});

test('the mode follows setMode; an edit carries its diff; rename, archive, compact, delete and the model list', async () => {
  const s = await api.createSession({ workspace_path: srv.workspace });
  const f = follow(s.id);
  try {
    await until(() => f.state === 'live', 'live');
    const sum = await api.setMode(s.id, 'accept_edits');
    assert.equal(sum.mode, 'accept_edits');
    await until(() => f.view.mode === 'accept_edits', 'session.mode_changed');
    const { turn_id } = await api.submitTurn(s.id, '/tool write_file {"path":"notes.txt","content":"hello\\nworld\\n"}');
    await until(() => f.view.turn.id === turn_id && f.view.turn.status !== 'in_flight', 'turn end');
    const tool = [...f.view.tools.values()].find((t) => t.name === 'write_file');
    assert.ok(tool, 'the write_file call');
    assert.equal(tool.status, 'completed');
    assert.deepEqual(tool.paths, ['notes.txt']);
    assert.match(tool.diff ?? '', /\+hello/);

    const renamed = await api.renameSession(s.id, '  my   notes ');
    assert.equal(renamed.title, 'my notes');
    assert.equal((await api.archiveSession(s.id)).archived, true);
    assert.equal((await api.archiveSession(s.id, false)).archived, undefined);

    const c = await api.compact(s.id);
    assert.match(c.compaction_id, /^cmp_/);
    await until(() => !f.view.context.compacting && f.view.context.last !== '', 'compaction end');

    const models = await api.models();
    assert.equal(models.models[0]?.id, models.default);
    assert.ok(models.models.some((m) => m.id === 'builtin:demo'));

    await until(() => f.view.turn.status !== 'in_flight', 'compaction released');
    await api.deleteSession(s.id);
    await assert.rejects(api.attach(s.id), (e: Error & { code?: string }) => e.code === 'session_not_found');
  } finally {
    f.stop();
  }
});
