// The differential test: randomly damaged copies of every conformance
// trace (written with the Go reducer's state for each by
// `go test ./tests/streaming-conformance/ -run TestMutants -mutants DIR`)
// must give the TypeScript View exactly the Go View's state, so the two
// clients agree on malformed input as well as on good input.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { View } from '../../src/client/view';
import type { RawEnvelope, Snapshot } from '../../src/client/protocol.gen';
import { comparable } from './helpers';

const dir = process.env['METIS_MUTANTS'];

test('differential: the TypeScript View and the Go View agree on every mutant', { skip: dir ? false : 'METIS_MUTANTS is not set (scripts/test.d/20-web-client.sh sets it)' }, () => {
  const names = readdirSync(dir!).sort();
  assert.ok(names.length >= 100, `only ${names.length} mutants`);
  const failures: string[] = [];
  for (const name of names) {
    const v = new View();
    for (const line of readFileSync(join(dir!, name, 'frames.jsonl'), 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      const f = JSON.parse(line) as Record<string, unknown>;
      if (f['type'] === 'snapshot') v.applySnapshot(f as unknown as Snapshot);
      else if (f['type'] === 'event') v.apply(f['event'] as RawEnvelope);
    }
    const want = JSON.parse(readFileSync(join(dir!, name, 'expected.json'), 'utf8')) as unknown;
    try {
      assert.deepStrictEqual(comparable(JSON.parse(JSON.stringify(v.toJSON()))), comparable(want));
    } catch (e) {
      failures.push(`${name}: ${e instanceof Error ? e.message.slice(0, 1500) : String(e)}`);
    }
  }
  assert.deepEqual(failures.slice(0, 3), [], `${failures.length} of ${names.length} mutants differ`);
});
