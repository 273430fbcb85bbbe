// Property tests of the reducer over the conformance traces: the same
// trace chunked differently, or with every event delivered twice, gives
// the same view; a changed message or tool call is always a new object.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { View, type ViewMessage, type ToolCall } from '../../src/client/view';
import type { RawEnvelope } from '../../src/client/protocol.gen';
import { cases, casesDir, comparable, frames, replay } from './helpers';

/** A small seeded PRNG (mulberry32), so a failure can be replayed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Splits s at random code point boundaries into 1..4 pieces. */
function split(s: string, rand: () => number): string[] {
  const cps = [...s];
  const n = 1 + Math.floor(rand() * Math.min(4, Math.max(1, cps.length)));
  const cuts = new Set<number>();
  while (cuts.size < n - 1 && cps.length > 1) cuts.add(1 + Math.floor(rand() * (cps.length - 1)));
  const at = [0, ...[...cuts].sort((a, b) => a - b), cps.length];
  return at.slice(1).map((end, i) => cps.slice(at[i], end).join(''));
}

const SPLITTABLE: Record<string, string> = { 'text.delta': 'text', 'thinking.delta': 'text', 'tool.use_input_delta': 'partial_json' };

/**
 * Re-chunks a trace: each splittable delta becomes several with the same
 * concatenation. The first piece keeps the event's id and the others get
 * ids just above it (below the next event's), so order is kept; a delta
 * at or before the newest id seen so far (an overlap) is left whole.
 */
function rechunk(fs: Record<string, unknown>[], rand: () => number): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  let newest = '';
  for (const f of fs) {
    if (f['type'] === 'snapshot') {
      const at = f['snapshot_at_event_id'];
      if (typeof at === 'string' && at > newest) newest = at;
    }
    if (f['type'] !== 'event') {
      out.push(f);
      continue;
    }
    const e = f['event'] as RawEnvelope;
    const field = SPLITTABLE[e.type];
    const p = e.payload as Record<string, unknown> | undefined;
    if (!field || !p || typeof p[field] !== 'string' || e.id <= newest) {
      out.push(f);
      if (e.id > newest) newest = e.id;
      continue;
    }
    const pieces = split(p[field] as string, rand);
    pieces.forEach((piece, i) => {
      const payload: Record<string, unknown> = { ...p, [field]: piece };
      if (e.type === 'thinking.delta' && i < pieces.length - 1) payload['signature'] = null; // the signature rides on the last
      out.push({ type: 'event', event: { ...e, id: i === 0 ? e.id : `${e.id}.${i}`, payload } });
    });
    newest = pieces.length > 1 ? `${e.id}.${pieces.length - 1}` : e.id;
  }
  return out;
}

function expected(name: string): unknown {
  return comparable(JSON.parse(readFileSync(join(casesDir, name, 'expected.json'), 'utf8')));
}

for (const name of cases) {
  test(`property: random chunkings of ${name} give the same view`, () => {
    const want = expected(name);
    for (let seed = 1; seed <= 25; seed++) {
      const v = replay(rechunk(frames(name), rng(seed)));
      assert.deepStrictEqual(comparable(v.toJSON()), want, `seed ${seed}`);
    }
  });

  test(`property: every event of ${name} delivered twice gives the same view`, () => {
    const twice = frames(name).flatMap((f) => (f['type'] === 'event' ? [f, f] : [f]));
    assert.deepStrictEqual(comparable(replay(twice).toJSON()), expected(name));
  });

  test(`property: in ${name}, whatever changed is a new object and the version moved`, () => {
    const v = new View();
    for (const f of frames(name)) {
      if (f['type'] !== 'event') {
        replay([f], v);
        continue;
      }
      const msgs = new Map<string, [ViewMessage, string]>(v.messages.map((m) => [m.id, [m, JSON.stringify(m)]]));
      const tools = new Map<string, [ToolCall, string]>([...v.tools].map(([k, t]) => [k, [t, JSON.stringify(t)]]));
      const msgList = v.messages;
      const before = JSON.stringify(v.toJSON());
      const version = v.version;
      v.apply(f['event'] as RawEnvelope);
      if (JSON.stringify(v.toJSON()) !== before) assert.notEqual(v.version, version, 'changed without a version bump');
      for (const m of v.messages) {
        const old = msgs.get(m.id);
        if (old && JSON.stringify(m) !== old[1]) assert.notEqual(m, old[0], `message ${m.id} changed in place`);
        if (old && old[0] !== m) assert.equal(JSON.stringify(old[0]), old[1], `the old object of ${m.id} was mutated`);
      }
      if (v.messages.length !== msgList.length) assert.notEqual(v.messages, msgList, 'the message list changed in place');
      for (const [k, t] of v.tools) {
        const old = tools.get(k);
        if (old && JSON.stringify(t) !== old[1]) assert.notEqual(t, old[0], `tool ${k} changed in place`);
        if (old) assert.equal(JSON.stringify(old[0]), old[1], `the old object of tool ${k} was mutated`);
      }
    }
  });
}

test('rechunk really splits deltas', () => {
  const fs = frames('plain_turn');
  const n = fs.filter((f) => f['type'] === 'event').length;
  const m = rechunk(fs, rng(7)).filter((f) => f['type'] === 'event').length;
  assert.ok(m > n, `${m} events after rechunking, ${n} before`);
});

test('prependMessages adds older history in front, skips what is held, and indexes tool results', () => {
  const v = new View();
  replay(frames('tools_and_thinking'), v);
  const n = v.messages.length;
  const older = [
    { id: 'msg_00OLD1', session_id: 's', role: 'assistant', status: 'complete', created_at: '',
      content: [{ type: 'tool_use', id: 'tu_old', name: 'read_file', input: { path: 'a' } }] },
    { id: 'msg_00OLD2', session_id: 's', role: 'tool', status: 'complete', created_at: '',
      content: [{ type: 'tool_result', tool_use_id: 'tu_old', content: 'A', is_error: false }] },
    { id: v.messages[0]!.id, session_id: 's', role: 'user', status: 'complete', created_at: '', content: [] },
    { id: '', role: 'user' },
    { id: 'msg_bad', content: 'not a list' },
  ];
  const version = v.version;
  assert.equal(v.prependMessages(older, false), 2);
  assert.notEqual(v.version, version);
  assert.equal(v.messages.length, n + 2);
  assert.equal(v.messages[0]!.id, 'msg_00OLD1');
  assert.equal(v.tools.get('tu_old')?.status, 'completed');
  assert.equal(v.tools.get('tu_old')?.result, 'A');
  assert.equal(v.hasOlder, false);
  // The positions are rebuilt: a later change to a held message lands in place.
  const last = v.messages.at(-1)!;
  v.apply({ id: 'evt_ZZZZZZZZZZZZZZZZZZZZZZZZZZ', type: 'text.delta', session_id: 's', turn_id: null, ts: '', actor: 'model',
    payload: { message_id: last.id, content_block_index: 0, text: '!' } });
  assert.equal(v.messages.length, n + 2);
  assert.ok(v.messages.at(-1)!.blocks[0]!.text.endsWith('!'));
});
