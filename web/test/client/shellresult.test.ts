// The dashboard's reading of a finished shell call's result
// (web/src/ui/shellresult.ts): the format internal/tool/shell.go writes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseShellResult } from '../../src/ui/shellresult';

test('a result splits into its exit code, stdout and stderr', () => {
  assert.deepEqual(parseShellResult('exit code: 0\nstdout:\nhello\nworld\nstderr:\n'), {
    exitCode: 0, notes: [], stdout: 'hello\nworld\n', stderr: '',
  });
  assert.deepEqual(parseShellResult('exit code: 3\nstdout:\nstderr:\nboom\n'), {
    exitCode: 3, notes: [], stdout: '', stderr: 'boom\n',
  });
});

test('notes and truncation lines are kept', () => {
  const r = parseShellResult(
    'exit code: -1\nnote: a background process kept the output open; it was closed after the command exited\n' +
      'stdout:\nab\n[stdout truncated: 10 more bytes not shown]\nstderr:\n',
  );
  assert.deepEqual(r, {
    exitCode: -1,
    notes: ['a background process kept the output open; it was closed after the command exited'],
    stdout: 'ab\n[stdout truncated: 10 more bytes not shown]\n',
    stderr: '',
  });
});

test('"stderr:" inside a line is output; a second "stderr:" line makes the split ambiguous', () => {
  assert.equal(parseShellResult('exit code: 0\nstdout:\nxstderr:\nstderr:\n')?.stdout, 'xstderr:\n');
  assert.equal(parseShellResult('exit code: 0\nstdout:\nstderr:\nstderr:\n'), null);
});

test('anything else is not a shell result', () => {
  for (const s of ['', 'hello', 'exit code: x\nstdout:\nstderr:\n', 'exit code: 0\nstderr:\n', 'exit code: 0\nstdout:\nno stderr section\n']) {
    assert.equal(parseShellResult(s), null, JSON.stringify(s));
  }
});
