/**
 * The shell tool's result as a person reads it. The tool reports
 * `exit code: N`, perhaps `note: …` lines, then `stdout:` and `stderr:`
 * sections, each with a `[stdout truncated: …]` line when it was cut
 * (internal/tool/shell.go; the Go client reads it with
 * `protocol.ParseShellResult`, by the same rules). A finished shell
 * card shows the output itself: the exit code is the card's badge, an
 * empty stream is left out, and stderr is marked as it is while the
 * command runs.
 */
export interface ShellResult {
  exitCode: number;
  /** The `note:` lines, without their prefix. */
  notes: string[];
  stdout: string;
  stderr: string;
}

/** The first line, with an exit code as the tool writes one (no "+", no leading zero). */
const HEAD = /^exit code: (0|-?[1-9]\d*)\n/;
const STDOUT = 'stdout:\n';
const STDERR = 'stderr:\n';

/**
 * shellExitCode reads the exit code from a shell result's first line,
 * undefined when the text does not begin `exit code: N`.
 */
export function shellExitCode(content: string): number | undefined {
  const head = HEAD.exec(content);
  if (!head) return undefined;
  const code = Number(head[1]);
  return Number.isSafeInteger(code) ? code : undefined;
}

/**
 * parseShellResult reads a shell result, or returns null when the text
 * is not one or cannot be split for sure (a `stderr:` line printed by
 * the command itself makes the split ambiguous): the card then shows
 * the text as it is.
 */
export function parseShellResult(content: string): ShellResult | null {
  const head = HEAD.exec(content);
  const exitCode = shellExitCode(content);
  if (!head || exitCode === undefined) return null;
  let rest = content.slice(head[0].length);
  const notes: string[] = [];
  while (rest.startsWith('note: ')) {
    const nl = rest.indexOf('\n');
    if (nl < 0) return null;
    notes.push(rest.slice('note: '.length, nl));
    rest = rest.slice(nl + 1);
  }
  if (!rest.startsWith(STDOUT)) return null;
  rest = rest.slice(STDOUT.length);
  // The stderr section starts at a line that is exactly "stderr:"; the
  // stdout before it ends with a newline (the tool adds one).
  let at = -1;
  for (let i = rest.indexOf(STDERR); i >= 0; i = rest.indexOf(STDERR, i + 1)) {
    if (i > 0 && rest[i - 1] !== '\n') continue;
    if (at >= 0) return null;
    at = i;
  }
  if (at < 0) return null;
  return { exitCode, notes, stdout: rest.slice(0, at), stderr: rest.slice(at + STDERR.length) };
}
