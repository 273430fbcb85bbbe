// The client's reading of a finished shell call's result
// (web/src/client/shellresult.ts): the format internal/tool/shell.go
// writes, read by the same rules as the Go client's
// protocol.ParseShellResult.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseShellResult, shellExitCode } from '../../src/client/shellresult';

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
  for (const s of ['', 'hello', 'exit code: x\nstdout:\nstderr:\n', 'exit code: 03\nstdout:\nstderr:\n', 'exit code: +1\nstdout:\nstderr:\n', 'exit code: 0\nstderr:\n', 'exit code: 0\nstdout:\nno stderr section\n']) {
    assert.equal(parseShellResult(s), null, JSON.stringify(s));
  }
});

test('shellExitCode reads the first line only, as the tool writes it', () => {
  assert.equal(shellExitCode('exit code: 137\nstdout:\n'), 137);
  assert.equal(shellExitCode('exit code: -1\n'), -1);
  for (const s of ['exit code: 0', 'exit code: 03\n', 'exit code: -0\n', ' exit code: 1\n']) assert.equal(shellExitCode(s), undefined, JSON.stringify(s));
});

test("a snapshot's stored shell result gives the call its exit code, as tool.completed's exit_code does live", async () => {
  const { View } = await import('../../src/client/view');
  const v = new View();
  const use = (id: string, command: string) => ({ type: 'tool_use', id, name: 'shell', input: { command } });
  const result = (id: string, content: string) => ({ type: 'tool_result', tool_use_id: id, content });
  v.applySnapshot({
    type: 'snapshot',
    session: { id: 'sess_a' },
    messages: [
      { id: 'msg_1', role: 'assistant', session_id: 'sess_a', status: 'complete', content: [use('tu_1', 'exit 3'), use('tu_2', 'true'), use('tu_3', 'sleep 9 &')] },
      { id: 'msg_2', role: 'tool', session_id: 'sess_a', status: 'complete', content: [
        result('tu_1', 'exit code: 3\nstdout:\nstderr:\noops\n'), result('tu_2', 'exit code: 0\nstdout:\nstderr:\n'), result('tu_3', 'started in the background as bg_1'),
      ] },
    ],
    snapshot_at_event_id: 'evt_01',
  } as never);
  assert.equal(v.tools.get('tu_1')?.exit_code, 3);
  assert.equal(v.tools.get('tu_2')?.exit_code, 0);
  assert.equal(v.tools.get('tu_3')?.exit_code, undefined);
});

test("a call the snapshot lists in running_tools reads running before its output arrives; one not listed stays pending", async () => {
  const { View } = await import('../../src/client/view');
  const v = new View();
  const use = (id: string, command: string) => ({ type: 'tool_use', id, name: 'shell', input: { command } });
  v.applySnapshot({
    type: 'snapshot',
    session: { id: 'sess_a', current_turn_id: 'turn_1', current_turn_status: 'in_flight' },
    messages: [
      { id: 'msg_1', role: 'assistant', session_id: 'sess_a', turn_id: 'turn_1', status: 'complete', content: [use('tu_1', 'make'), use('tu_2', 'make test'), use('tu_3', 'true')] },
      { id: 'msg_2', role: 'tool', session_id: 'sess_a', turn_id: 'turn_1', status: 'complete', content: [{ type: 'tool_result', tool_use_id: 'tu_3', content: 'exit code: 0\nstdout:\nstderr:\n' }] },
    ],
    running_tools: ['tu_1', 'tu_3', 'tu_unknown', 7],
    snapshot_at_event_id: 'evt_01',
  } as never);
  assert.equal(v.tools.get('tu_1')?.status, 'running');
  assert.equal(v.tools.get('tu_2')?.status, 'pending');
  assert.equal(v.tools.get('tu_3')?.status, 'completed');
  assert.equal(v.tools.get('tu_unknown'), undefined);
});
