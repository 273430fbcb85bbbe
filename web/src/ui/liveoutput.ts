// A running shell command's live output (tool.output_delta), folded per
// tool call for its card: stdout and stderr as runs in arrival order,
// kept bounded (the oldest text dropped first, and counted), with the
// places where deltas are missing (a replay that no longer held them, a
// page opened mid-command) marked, and the cap's end said. Offsets are
// UTF-8 bytes, as the server counts them.

/** One run of output, or a gap of bytes never seen. */
export interface OutputRun {
  /** Stable for the run's life (a render key). */
  key: number;
  stream: 'stdout' | 'stderr' | 'gap';
  /** The text (empty for a gap). */
  text: string;
  /** A gap's size in bytes. */
  bytes: number;
}

/** A call's live output so far. A changed one is a new object. */
export interface LiveOutput {
  runs: readonly OutputRun[];
  /** The offset reached: bytes the deltas seen carried, gaps included. */
  bytes: number;
  /** Characters dropped from the front to keep the card bounded. */
  cut: number;
  /** The server stopped streaming this call (its cap); the command runs on. */
  capped: boolean;
}

/** Most characters a card keeps (the newest). */
export const OUTPUT_KEEP_CHARS = 64 * 1024;
/** Most runs a card keeps (stdout and stderr interleaving finely). */
export const OUTPUT_KEEP_RUNS = 400;

/** text without its first n characters, never splitting a surrogate pair: the text kept and the count dropped. */
function dropFront(text: string, n: number): [string, number] {
  let i = n;
  if (i < text.length && (text.charCodeAt(i) & 0xfc00) === 0xdc00) i++;
  return [text.slice(i), i];
}

const enc = new TextEncoder();
const dec = new TextDecoder();
let nextKey = 1;

export const EMPTY_OUTPUT: LiveOutput = { runs: [], bytes: 0, cut: 0, capped: false };

/**
 * The output after one delta. A delta wholly before the offset reached
 * (seen already) changes nothing; one partly before it adds its new part;
 * one past it first records the gap.
 */
export function foldOutput(prev: LiveOutput, stream: string, data: string, offset: number, capped: boolean): LiveOutput {
  let bytes = prev.bytes;
  let text = data;
  const runs = [...prev.runs];
  if (offset > bytes) {
    runs.push({ key: nextKey++, stream: 'gap', text: '', bytes: offset - bytes });
    bytes = offset;
  }
  if (text && offset < bytes) {
    const raw = enc.encode(text);
    const skip = bytes - offset;
    text = skip >= raw.length ? '' : dec.decode(raw.subarray(skip));
  }
  if (!text && !(capped && !prev.capped) && runs.length === prev.runs.length) return prev;
  if (text) {
    bytes += enc.encode(text).length;
    const s: OutputRun['stream'] = stream === 'stderr' ? 'stderr' : 'stdout';
    const last = runs.at(-1);
    if (last && last.stream === s) runs[runs.length - 1] = { ...last, text: last.text + text };
    else runs.push({ key: nextKey++, stream: s, text, bytes: 0 });
  }
  // Bounded: the newest OUTPUT_KEEP_CHARS characters in at most OUTPUT_KEEP_RUNS runs.
  let cut = prev.cut;
  let chars = runs.reduce((n, r) => n + r.text.length, 0);
  while (runs.length > 1 && (chars > OUTPUT_KEEP_CHARS || runs.length > OUTPUT_KEEP_RUNS)) {
    const first = runs[0]!;
    const over = chars - OUTPUT_KEEP_CHARS;
    if (runs.length <= OUTPUT_KEEP_RUNS && over < first.text.length) {
      const [kept, dropped] = dropFront(first.text, over);
      runs[0] = { ...first, text: kept };
      cut += dropped;
      chars -= dropped;
      break;
    }
    runs.shift();
    cut += first.text.length;
    chars -= first.text.length;
  }
  if (runs.length === 1 && chars > OUTPUT_KEEP_CHARS) {
    const [kept, dropped] = dropFront(runs[0]!.text, chars - OUTPUT_KEEP_CHARS);
    runs[0] = { ...runs[0]!, text: kept };
    cut += dropped;
  }
  return { runs, bytes, cut, capped: prev.capped || capped };
}

/** Whether a call in this state has its final result (its live output is over). */
export function outputEnded(status: string | undefined): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled';
}
