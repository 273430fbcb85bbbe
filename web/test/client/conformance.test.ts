// The streaming conformance suite (spec §11.3) run against the
// TypeScript View: the same traces and expected states as the Go runner
// (tests/streaming-conformance/runner_test.go).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cases, casesDir, comparable, frames, replay } from './helpers';

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
