// Shared helpers of the client's tests.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { View } from '../../src/client/view';
import type { RawEnvelope, Snapshot } from '../../src/client/protocol.gen';

/** The repository root: $METIS_REPO, else the nearest parent of the cwd with a go.mod. */
export function repoRoot(): string {
  if (process.env['METIS_REPO']) return resolve(process.env['METIS_REPO']);
  let d = process.cwd();
  while (!existsSync(join(d, 'go.mod'))) {
    const up = dirname(d);
    if (up === d) throw new Error('repository root not found: set METIS_REPO');
    d = up;
  }
  return d;
}

const NULLABLE_LISTS = new Set(['messages', 'blocks', 'errors']);

/**
 * The Go View's JSON made comparable across languages: Go encodes an
 * empty list as null or [] depending on how it was built (a nil slice or
 * an empty one), which no reader distinguishes; both become absent for
 * messages, blocks and errors. Everything else must match exactly.
 */
export function comparable(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(comparable);
  if (x === null || typeof x !== 'object') return x;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(x as Record<string, unknown>)) {
    const c = comparable(v);
    if (NULLABLE_LISTS.has(k) && (c === null || (Array.isArray(c) && c.length === 0))) continue;
    out[k] = c;
  }
  return out;
}

/** The conformance cases' directory. */
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

/** The conformance cases, by name. */
export const cases = readdirSync(casesDir).sort();

