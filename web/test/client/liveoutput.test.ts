// The dashboard's fold of tool.output_delta (web/src/ui/liveoutput.ts):
// offsets in UTF-8 bytes, overlaps skipped, gaps recorded, the kept text
// bounded. A seeded random property: however a call's output is cut into
// deltas, and whichever deltas are delivered twice, the text shown is the
// output's end, and every byte is either shown, cut for the bound, or in a gap.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EMPTY_OUTPUT, OUTPUT_KEEP_CHARS, foldOutput, type LiveOutput } from '../../src/ui/liveoutput';

const bytes = (s: string): number => new TextEncoder().encode(s).length;
const shown = (o: LiveOutput): string => o.runs.map((r) => r.text).join('');

test('deltas in order show the output, stdout and stderr as separate runs', () => {
  let o = EMPTY_OUTPUT;
  o = foldOutput(o, 'stdout', 'a1\n', 0, false);
  o = foldOutput(o, 'stdout', 'a2\n', 3, false);
  o = foldOutput(o, 'stderr', 'é!\n', 6, false);
  assert.deepEqual(o.runs.map((r) => [r.stream, r.text]), [['stdout', 'a1\na2\n'], ['stderr', 'é!\n']]);
  assert.equal(o.bytes, 6 + bytes('é!\n'));
});

test('a delta seen already changes nothing; one overlapping adds only its new part (by bytes)', () => {
  let o = foldOutput(EMPTY_OUTPUT, 'stdout', 'héllo', 0, false);
  assert.equal(foldOutput(o, 'stdout', 'héllo', 0, false), o);
  o = foldOutput(o, 'stdout', 'llo world', bytes('hé'), false);
  assert.equal(shown(o), 'héllo world');
});

test('a first offset above 0, or a jump, is a gap of the missing bytes', () => {
  let o = foldOutput(EMPTY_OUTPUT, 'stdout', 'late', 100, false);
  assert.deepEqual(o.runs.map((r) => [r.stream, r.bytes]), [['gap', 100], ['stdout', 0]]);
  o = foldOutput(o, 'stdout', 'later', 204, false);
  assert.deepEqual(o.runs.map((r) => r.stream), ['gap', 'stdout', 'gap', 'stdout']);
  assert.equal(o.runs[2]!.bytes, 100);
});

test('the capped delta marks the output stopped', () => {
  const o = foldOutput(foldOutput(EMPTY_OUTPUT, 'stdout', 'x', 0, false), 'stdout', '', 1, true);
  assert.equal(o.capped, true);
  assert.equal(shown(o), 'x');
});

test('property: any cut into deltas, any repeats: the newest text shown, bounded, every character accounted for', () => {
  let seed = 7;
  const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n);
  const alphabet = ['a', 'b', '\n', 'é', '€', '😀'];
  for (let round = 0; round < 200; round++) {
    const len = rnd(3) === 0 ? OUTPUT_KEEP_CHARS + rnd(5000) : rnd(300);
    let text = '';
    while (text.length < len) text += alphabet[rnd(alphabet.length)]!.repeat(1 + rnd(50));
    const chars = [...text];
    let o = EMPTY_OUTPUT;
    let off = 0;
    let i = 0;
    while (i < chars.length) {
      const n = 1 + rnd(2000);
      const piece = chars.slice(i, i + n).join('');
      const stream = rnd(4) === 0 ? 'stderr' : 'stdout';
      o = foldOutput(o, stream, piece, off, false);
      if (rnd(5) === 0) o = foldOutput(o, stream, piece, off, false); // delivered twice
      off += bytes(piece);
      i += n;
    }
    const s = shown(o);
    assert.ok(s.length <= OUTPUT_KEEP_CHARS, `bounded: ${s.length}`);
    assert.ok(text.endsWith(s), 'the newest output, in order');
    assert.equal(o.cut + s.length, text.length, 'shown + cut = all');
    assert.equal(o.bytes, bytes(text));
    assert.ok(!o.runs.some((r) => r.stream === 'gap'));
  }
});
