// The streaming conformance suite (spec §11.3) run against the
// TypeScript View: the same traces and expected states as the Go runner
// (tests/streaming-conformance/runner_test.go).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { View } from '../../src/client/view';
import type { RawEnvelope, Snapshot } from '../../src/client/protocol.gen';
import { repoRoot, comparable } from './helpers';

export const casesDir = join(repoRoot(), 'tests', 'streaming-conformance', 'cases');

/** The frames of a case, parsed. */
export function frames(name: string): Record<string, unknown>[] {
  return readFileSync(join(casesDir, name, 'frames.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Folds frames into a fresh view, as the Go runner does. */
export function replay(fs: Record<string, unknown>[], v = new View()): View {
  for (const f of fs) {
    if (f['type'] === 'snapshot') v.applySnapshot(f as unknown as Snapshot);
    else if (f['type'] === 'event') v.apply(f['event'] as RawEnvelope);
    // subscribe_ack, subscribe_error, ping, pong, error and _connection change no state.
  }
  return v;
}

export const cases = readdirSync(casesDir).sort();

test('there are conformance cases', () => {
  assert.ok(cases.length >= 9, `only ${cases.length} cases`);
});

for (const name of cases) {
  test(`conformance: ${name}`, () => {
    const v = replay(frames(name));
    const want = JSON.parse(readFileSync(join(casesDir, name, 'expected.json'), 'utf8')) as unknown;
    assert.deepStrictEqual(comparable(v.toJSON()), comparable(want));
  });
}
