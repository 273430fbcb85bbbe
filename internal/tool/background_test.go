//go:build linux

package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/sandbox"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// bgFixture is a shell with background commands, the two tools that go
// with it, and what Notify was told.
type bgFixture struct {
	bg   *tool.Background
	sh   tool.Shell
	out  tool.ShellOutput
	kill tool.ShellKill

	mu      sync.Mutex
	notices []tool.BackgroundNotice
}

func newBG(t *testing.T, max, output int) *bgFixture {
	t.Helper()
	f := &bgFixture{}
	f.bg = &tool.Background{MaxPerSession: max, OutputBytes: output, Notify: func(n tool.BackgroundNotice) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.notices = append(f.notices, n)
	}}
	f.sh = tool.Shell{Grace: 300 * time.Millisecond, Background: f.bg, Sandbox: sandbox.Settings{CacheDir: filepath.Join(t.TempDir(), "cache")}}
	f.out, f.kill = tool.ShellOutput{Background: f.bg}, tool.ShellKill{Background: f.bg}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := f.bg.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return f
}

var bgID = regexp.MustCompile(`bg_[0-9a-f]{12}`)

// start runs cmd in the background and returns its id.
func (f *bgFixture) start(t *testing.T, env tool.Env, cmd string, extra ...any) string {
	t.Helper()
	in := map[string]any{"command": cmd, "background": true}
	for i := 0; i+1 < len(extra); i += 2 {
		in[extra[i].(string)] = extra[i+1]
	}
	res, err := run(t, f.sh, env, in)
	if err != nil {
		t.Fatalf("start %q: %v", cmd, err)
	}
	id := bgID.FindString(res.Content)
	if id == "" {
		t.Fatalf("no id in %q", res.Content)
	}
	return id
}

// read calls shell_output.
func (f *bgFixture) read(t *testing.T, env tool.Env, id string) string {
	t.Helper()
	res, err := run(t, f.out, env, map[string]any{"id": id})
	if err != nil {
		t.Fatalf("shell_output %s: %v", id, err)
	}
	return res.Content
}

// readUntil calls shell_output until the output read so far holds want,
// and returns it all.
func (f *bgFixture) readUntil(t *testing.T, env tool.Env, id, want string) string {
	t.Helper()
	var all strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for {
		all.WriteString(f.read(t, env, id))
		if strings.Contains(all.String(), want) {
			return all.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output of %s:\n%s", want, id, all.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *bgFixture) exited() []protocol.ToolBackgroundExitedPayload {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []protocol.ToolBackgroundExitedPayload
	for _, n := range f.notices {
		if n.Exited != nil {
			out = append(out, *n.Exited)
		}
	}
	return out
}

// waitGone waits until no process has pid (not even a zombie).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !gone(pid) && alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d is still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBackgroundReturnsAnIDAtOnce: the call returns while the command
// runs, and Notify heard of it before the call returned.
func TestBackgroundReturnsAnIDAtOnce(t *testing.T) {
	f := newBG(t, 4, 0)
	env := newEnv(t, t.TempDir())
	env.ToolUseID = "toolu_1"
	id := f.start(t, env, "sleep 300")
	f.mu.Lock()
	n := f.notices
	f.mu.Unlock()
	if len(n) != 1 || n[0].Started == nil || n[0].Started.BackgroundID != id || n[0].Started.ToolUseID != "toolu_1" || n[0].SessionID != env.SessionID || n[0].TurnID != env.TurnID {
		t.Fatalf("notices %+v", n)
	}
	l := f.bg.List(env.SessionID)
	if len(l) != 1 || l[0].ID != id || !l[0].Running || l[0].Command != "sleep 300" || l[0].ExitCode != nil {
		t.Fatalf("list %+v", l)
	}
	if out := f.read(t, env, id); !strings.Contains(out, id+": running") || !strings.Contains(out, "(no new output)") {
		t.Fatalf("output %q", out)
	}
}

// TestBackgroundOutputSinceLastRead: each shell_output returns what was
// printed since the previous one, stdout and stderr together.
func TestBackgroundOutputSinceLastRead(t *testing.T) {
	f := newBG(t, 4, 0)
	env := newEnv(t, t.TempDir())
	id := f.start(t, env, "echo one; echo err-one >&2; while [ ! -e go ]; do sleep 0.02; done; echo two; sleep 300")
	first := f.readUntil(t, env, id, "err-one")
	if !strings.Contains(first, "one\n") {
		t.Fatalf("first read %q", first)
	}
	mustWrite(t, filepath.Join(env.Workspace, "go"), "")
	second := f.readUntil(t, env, id, "two")
	if strings.Contains(second, "one") {
		t.Fatalf("the second read repeats the first: %q", second)
	}
}

// TestBackgroundExitCode: a command that ends by itself is listed as
// ended with its exit code, its last output still readable.
func TestBackgroundExitCode(t *testing.T) {
	f := newBG(t, 4, 0)
	env := newEnv(t, t.TempDir())
	id := f.start(t, env, "echo bye; exit 7")
	out := f.readUntil(t, env, id, "exit code 7")
	if !strings.Contains(out, "bye") || !strings.Contains(out, "ended (exited)") {
		t.Fatalf("output %q", out)
	}
	l := f.bg.List(env.SessionID)
	if len(l) != 1 || l[0].Running || l[0].ExitCode == nil || *l[0].ExitCode != 7 || l[0].EndReason != protocol.BackgroundExited || l[0].EndedAt == nil {
		t.Fatalf("list %+v", l)
	}
	ex := f.exited()
	if len(ex) != 1 || ex[0].BackgroundID != id || ex[0].ExitCode == nil || *ex[0].ExitCode != 7 || ex[0].Reason != protocol.BackgroundExited || ex[0].OutputBytes != 4 {
		t.Fatalf("exited %+v", ex)
	}
}

// TestBackgroundRingBufferKeepsTheLastBytes: output past the buffer,
// unread, is dropped oldest first, and the answer says how much.
func TestBackgroundRingBufferKeepsTheLastBytes(t *testing.T) {
	const size = 4096
	f := newBG(t, 4, size)
	env := newEnv(t, t.TempDir())
	id := f.start(t, env, `i=0; while [ $i -lt 2000 ]; do printf 'line %05d\n' $i; i=$((i+1)); done`)
	deadline := time.Now().Add(30 * time.Second)
	for f.bg.List(env.SessionID)[0].Running {
		if time.Now().After(deadline) {
			t.Fatal("the command did not end")
		}
		time.Sleep(20 * time.Millisecond)
	}
	out := f.read(t, env, id)
	const total = 2000 * 11
	if !strings.Contains(out, fmt.Sprintf("[%d bytes printed before these were dropped", total-size)) {
		t.Fatalf("no drop note for %d bytes in %q", total-size, out[:min(len(out), 300)])
	}
	if !strings.HasSuffix(out, "line 01999\n") {
		t.Fatalf("the last line is missing: %q", out[max(0, len(out)-100):])
	}
	body := out[strings.Index(out, "read more often]\n")+len("read more often]\n"):]
	if len(body) != size {
		t.Fatalf("%d bytes of output returned, want the buffer's %d", len(body), size)
	}
	if again := f.read(t, env, id); !strings.Contains(again, "(no new output)") || strings.Contains(again, "dropped") {
		t.Fatalf("a second read %q", again)
	}
	if ex := f.exited(); len(ex) != 1 || ex[0].OutputBytes != total || ex[0].DroppedBytes != total-size {
		t.Fatalf("exited %+v", ex)
	}
}

// TestBackgroundKillStopsEveryProcess: shell_kill stops the command and
// every process it started, escaped ones (setsid) included, and returns
// how it ended.
func TestBackgroundKillStopsEveryProcess(t *testing.T) {
	needs(t, "setsid")
	f := newBG(t, 4, 0)
	env := newEnv(t, t.TempDir())
	id := f.start(t, env, `sleep 300 & echo $! > a; setsid sh -c 'echo $$ > b; exec sleep 300' & echo started; wait`)
	f.readUntil(t, env, id, "started")
	a, b := readPid(t, filepath.Join(env.Workspace, "a")), readPid(t, filepath.Join(env.Workspace, "b"))
	res, err := run(t, f.kill, env, map[string]any{"id": id})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Content, "ended (killed)") {
		t.Fatalf("kill answered %q", res.Content)
	}
	for _, pid := range []int{a, b} {
		if !gone(pid) && alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d outlived shell_kill", pid)
		}
	}
	if ex := f.exited(); len(ex) != 1 || ex[0].Reason != protocol.BackgroundKilled || ex[0].ExitCode != nil {
		t.Fatalf("exited %+v", ex)
	}
	// Killing it again is no error: it tells how it ended.
	if res, err := run(t, f.kill, env, map[string]any{"id": id}); err != nil || !strings.Contains(res.Content, "ended (killed)") {
		t.Fatalf("second kill: %v %q", err, res.Content)
	}
}

// TestBackgroundTimeout: timeout_s bounds a background command's life.
func TestBackgroundTimeout(t *testing.T) {
	f := newBG(t, 4, 0)
	env := newEnv(t, t.TempDir())
	id := f.start(t, env, "sleep 300", "timeout_s", 0.2)
	out := f.readUntil(t, env, id, "ended (timeout)")
	if !strings.Contains(out, "stopped by a signal") {
		t.Fatalf("output %q", out)
	}
}

// TestBackgroundLimitPerSession: a session runs at most MaxPerSession
// commands at once; another session has its own count, and a slot is
// free again once a command has ended.
func TestBackgroundLimitPerSession(t *testing.T) {
	f := newBG(t, 2, 0)
	env := newEnv(t, t.TempDir())
	first := f.start(t, env, "sleep 300")
	f.start(t, env, "sleep 300")
	_, err := run(t, f.sh, env, map[string]any{"command": "sleep 300", "background": true})
	wantClass(t, err, tool.ClassInvalidInput)
	if msg := err.Error(); !strings.Contains(msg, "already runs 2 background commands") || !strings.Contains(msg, "shell_kill") || !strings.Contains(msg, first) {
		t.Fatalf("message %q", msg)
	}
	other := env
	other.SessionID = "ses_other"
	f.start(t, other, "sleep 300")
	if _, err := run(t, f.kill, env, map[string]any{"id": first}); err != nil {
		t.Fatal(err)
	}
	f.start(t, env, "sleep 300")
}

// TestBackgroundBadInput: every bad input is invalid_input with a
// message the model can act on; another session's id is as unknown as
// an id that never was.
func TestBackgroundBadInput(t *testing.T) {
	f := newBG(t, 4, 0)
	env := newEnv(t, t.TempDir())
	id := f.start(t, env, "sleep 300")
	other := env
	other.SessionID = "ses_other"
	for _, tc := range []struct {
		name  string
		tl    tool.Tool
		env   tool.Env
		input string
		want  string
	}{
		{"output without id", f.out, env, `{}`, "id is required"},
		{"kill without id", f.kill, env, `{}`, "id is required"},
		{"id of the wrong type", f.out, env, `{"id": 7}`, "not a valid object"},
		{"unknown id", f.out, env, `{"id": "bg_000000000000"}`, "no background command"},
		{"another session's id", f.out, other, `{"id": "` + id + `"}`, "no background command"},
		{"another session's id, kill", f.kill, other, `{"id": "` + id + `"}`, "no background command"},
		{"background of the wrong type", f.sh, env, `{"command": "true", "background": "yes"}`, "not a valid object"},
		{"background without command", f.sh, env, `{"background": true}`, "command is required"},
		{"background with a bad timeout", f.sh, env, `{"command": "true", "background": true, "timeout_s": -1}`, "timeout_s must be positive"},
		{"background turned off", tool.Shell{}, env, `{"command": "true", "background": true}`, "turned off"},
		{"output with background turned off", tool.ShellOutput{}, env, `{"id": "bg_000000000000"}`, "turned off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.tl.Run(context.Background(), tc.env, json.RawMessage(tc.input))
			wantClass(t, err, tool.ClassInvalidInput)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("message %q, want %q", err, tc.want)
			}
		})
	}
	if _, err := run(t, f.out, other, map[string]any{"id": id}); strings.Contains(err.Error(), id+"]") || strings.Contains(err.Error(), "its background commands are") {
		t.Fatalf("another session's error lists this session's commands: %v", err)
	}
	if l := f.bg.List(env.SessionID); len(l) != 1 || !l[0].Running {
		t.Fatalf("bad input changed the command: %+v", l)
	}
}

// TestBackgroundOutlivesTheCallsContext: cancelling the turn (the
// call's context) does not stop a background command.
func TestBackgroundOutlivesTheCallsContext(t *testing.T) {
	f := newBG(t, 4, 0)
	env := newEnv(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	res, err := f.sh.Run(ctx, env, json.RawMessage(`{"command": "echo $$ > pid; while :; do echo tick; sleep 0.05; done", "background": true}`))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	id := bgID.FindString(res.Content)
	pid := readPid(t, filepath.Join(env.Workspace, "pid"))
	f.readUntil(t, env, id, "tick")
	time.Sleep(200 * time.Millisecond)
	if !alive(pid) || !f.bg.List(env.SessionID)[0].Running {
		t.Fatal("the background command ended with the call's context")
	}
}

// TestBackgroundEndSessionStopsItsCommands: deleting a session stops
// its commands (and forgets them), not another session's.
func TestBackgroundEndSessionStopsItsCommands(t *testing.T) {
	f := newBG(t, 4, 0)
	env := newEnv(t, t.TempDir())
	other := env
	other.SessionID = "ses_other"
	f.start(t, env, "echo $$ > mine; exec sleep 300")
	f.start(t, other, "echo $$ > theirs; exec sleep 300")
	mine, theirs := readPid(t, filepath.Join(env.Workspace, "mine")), readPid(t, filepath.Join(env.Workspace, "theirs"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.bg.EndSession(ctx, env.SessionID); err != nil {
		t.Fatal(err)
	}
	waitGone(t, mine)
	if !alive(theirs) {
		t.Fatal("another session's command was stopped")
	}
	if l := f.bg.List(env.SessionID); len(l) != 0 {
		t.Fatalf("the deleted session still lists %+v", l)
	}
	if ex := f.exited(); len(ex) != 1 || ex[0].Reason != protocol.BackgroundSessionDeleted {
		t.Fatalf("exited %+v", ex)
	}
}

// TestBackgroundCloseStopsEverything: Close stops every command of
// every session, tells Notify of each before it returns, refuses new
// ones, and leaves no goroutine behind.
func TestBackgroundCloseStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	f := newBG(t, 4, 0)
	env := newEnv(t, t.TempDir())
	var pids []int
	for i, sid := range []string{"ses_a", "ses_a", "ses_b"} {
		e := env
		e.SessionID = sid
		f.start(t, e, fmt.Sprintf("trap '' TERM; echo $$ > p%d; while :; do sleep 0.05; done", i))
		pids = append(pids, readPid(t, filepath.Join(env.Workspace, fmt.Sprintf("p%d", i))))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.bg.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !gone(pid) && alive(pid) {
			t.Fatalf("process %d outlived Close", pid)
		}
	}
	ex := f.exited()
	if len(ex) != 3 {
		t.Fatalf("exited %+v", ex)
	}
	for _, e := range ex {
		if e.Reason != protocol.BackgroundServerShutdown {
			t.Fatalf("reason %q", e.Reason)
		}
	}
	_, err := run(t, f.sh, env, map[string]any{"command": "true", "background": true})
	if err == nil || !strings.Contains(err.Error(), "stopping") {
		t.Fatalf("a command started after Close: %v", err)
	}
}

// TestBackgroundSurvivesTheEscapedSweep: the server's sweep of escaped
// processes leaves a running background command alone: its supervisor
// is a child the server started and waits for.
func TestBackgroundSurvivesTheEscapedSweep(t *testing.T) {
	f := newBG(t, 4, 0)
	env := newEnv(t, t.TempDir())
	f.start(t, env, "echo $$ > pid; exec sleep 300")
	pid := readPid(t, filepath.Join(env.Workspace, "pid"))
	sandbox.SweepEscaped()
	time.Sleep(100 * time.Millisecond)
	if !alive(pid) || !f.bg.List(env.SessionID)[0].Running {
		t.Fatal("the sweep killed a running background command")
	}
}

// TestBackgroundRunsInTheSandbox: a background command is confined as a
// foreground one is (no writes outside the workspace, no TCP), and its
// $TMPDIR lives as long as it does, then goes.
func TestBackgroundRunsInTheSandbox(t *testing.T) {
	needSandbox(t)
	fx := newFixture(t)
	f := newBG(t, 4, 0)
	f.sh.Sandbox = fx.sh.Sandbox
	port, accepted := countingListener(t)
	cmd := fmt.Sprintf(`echo x > %s/escaped; echo write=$?; cat %s/config.yaml; echo read=$?; `, fx.outside, fx.home)
	if _, err := exec.LookPath("bash"); err == nil {
		cmd += `bash -c 'echo hi > /dev/tcp/127.0.0.1/` + port + `'; echo tcp=$?; `
	}
	cmd += `echo "$TMPDIR" > tmpdir; touch "$TMPDIR/f"; echo ready; while [ ! -e stop ]; do sleep 0.02; done`
	id := f.start(t, fx.env, cmd)
	out := f.readUntil(t, fx.env, id, "ready")
	if strings.Contains(out, "write=0") || strings.Contains(out, "read=0") || strings.Contains(out, fakeKey) || strings.Contains(out, "tcp=0") {
		t.Fatalf("the sandbox did not confine the background command:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(fx.outside, "escaped")); err == nil {
		t.Fatal("a file was written outside the workspace")
	}
	if accepted.Load() != 0 {
		t.Fatal("the background command connected over TCP")
	}
	b, err := os.ReadFile(filepath.Join(fx.env.Workspace, "tmpdir"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := strings.TrimSpace(string(b))
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(tmp, "f")); err != nil {
		t.Fatalf("the command's $TMPDIR went while it ran: %v", err)
	}
	mustWrite(t, filepath.Join(fx.env.Workspace, "stop"), "")
	f.readUntil(t, fx.env, id, "exit code 0")
	if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the $TMPDIR %s outlived the command: %v", tmp, err)
	}
}

// TestBackgroundStopsWhenTheServerDies: a process holding background
// commands is killed with SIGKILL (a crash): the supervisor's lifeline
// closes and every process of the command is stopped.
func TestBackgroundStopsWhenTheServerDies(t *testing.T) {
	if dir := os.Getenv("METIS_TEST_BG_SERVER"); dir != "" {
		// The "server": start a background command, then wait to die.
		f := newBG(t, 4, 0)
		f.start(t, newEnv(t, dir), `setsid sh -c 'echo $$ > escaped; exec sleep 300' & echo $$ > pid; exec sleep 300`)
		time.Sleep(time.Hour)
	}
	needs(t, "setsid")
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBackgroundStopsWhenTheServerDies$")
	cmd.Env = append(os.Environ(), "METIS_TEST_BG_SERVER="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid, escaped := readPid(t, filepath.Join(dir, "pid")), readPid(t, filepath.Join(dir, "escaped"))
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	waitGone(t, pid)
	waitGone(t, escaped)
}
