//go:build unix

package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/tool"
)

func shellIn(cmd string, timeout float64) json.RawMessage {
	m := map[string]any{"command": cmd}
	if timeout > 0 {
		m["timeout_s"] = timeout
	}
	b, _ := json.Marshal(m)
	return b
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runCancelled starts cmd, waits until file appears, cancels, and
// returns how long Run took after the cancel and its error.
func runCancelled(t *testing.T, sh tool.Shell, env tool.Env, cmd, file string) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type out struct {
		err error
		at  time.Time
	}
	ch := make(chan out, 1)
	go func() {
		_, err := sh.Run(ctx, env, shellIn(cmd, 0))
		ch <- out{err, time.Now()}
	}()
	readPid(t, filepath.Join(env.Workspace, file))
	cancelled := time.Now()
	cancel()
	select {
	case o := <-ch:
		return o.at.Sub(cancelled), o.err
	case <-time.After(20 * time.Second):
		t.Fatal("shell did not return after cancel")
	}
	return 0, nil
}

func TestShellRunsInWorkspace(t *testing.T) {
	ws := t.TempDir()
	env := newEnv(t, ws)
	res, err := tool.Shell{}.Run(context.Background(), env, shellIn("pwd; echo oops >&2; exit 3", 0))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Content, "exit code: 3") || !strings.Contains(res.Content, ws) || !strings.Contains(res.Content, "stderr:\noops") {
		t.Fatalf("content %q", res.Content)
	}
	if !strings.HasPrefix(res.Summary, "exit 3") {
		t.Errorf("summary %q", res.Summary)
	}
}

func TestShellCancelLeavesNoProcess(t *testing.T) {
	env := newEnv(t, t.TempDir())
	took, err := runCancelled(t, tool.Shell{Grace: 500 * time.Millisecond}, env, "sleep 300 & echo $! > pid; wait", "pid")
	if tool.ClassOf(err) != tool.ClassCancelled {
		t.Fatalf("class %q (%v)", tool.ClassOf(err), err)
	}
	pid := readPid(t, filepath.Join(env.Workspace, "pid"))
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("background sleep %d survived the cancel", pid)
	}
	if took > 5*time.Second {
		t.Errorf("cancel took %v", took)
	}
}

func TestShellTermTrapRunsBeforeKill(t *testing.T) {
	env := newEnv(t, t.TempDir())
	cmd := `trap 'touch bye; exit 0' TERM; echo $$ > pid; while true; do sleep 0.05; done`
	_, err := runCancelled(t, tool.Shell{Grace: 2 * time.Second}, env, cmd, "pid")
	if tool.ClassOf(err) != tool.ClassCancelled {
		t.Fatalf("class %q", tool.ClassOf(err))
	}
	if _, err := os.Stat(filepath.Join(env.Workspace, "bye")); err != nil {
		t.Fatal("the TERM trap did not run before the kill")
	}
}

func TestShellIgnoringTermGetsKilled(t *testing.T) {
	env := newEnv(t, t.TempDir())
	cmd := `trap '' TERM; echo $$ > pid; while true; do sleep 0.05; done`
	took, err := runCancelled(t, tool.Shell{Grace: 300 * time.Millisecond}, env, cmd, "pid")
	if tool.ClassOf(err) != tool.ClassCancelled {
		t.Fatalf("class %q", tool.ClassOf(err))
	}
	if pid := readPid(t, filepath.Join(env.Workspace, "pid")); alive(pid) {
		t.Fatalf("process %d ignoring TERM survived", pid)
	}
	if took < 250*time.Millisecond {
		t.Errorf("returned after %v, before the grace period", took)
	}
}

// TestShellSetsidGrandchildCannotHoldTheCall: a process that left the
// group but holds stdout delays a cancelled call by the grace period at
// most.
func TestShellSetsidGrandchildCannotHoldTheCall(t *testing.T) {
	env := newEnv(t, t.TempDir())
	grace := 300 * time.Millisecond
	cmd := `setsid sh -c 'echo $$ > gpid; exec sleep 300' & sleep 0.2; echo $$ > pid; wait`
	took, err := runCancelled(t, tool.Shell{Grace: grace}, env, cmd, "pid")
	gpid := readPid(t, filepath.Join(env.Workspace, "gpid"))
	t.Cleanup(func() { syscall.Kill(gpid, syscall.SIGKILL) })
	if tool.ClassOf(err) != tool.ClassCancelled {
		t.Fatalf("class %q (%v)", tool.ClassOf(err), err)
	}
	if took > 3*grace+2*time.Second {
		t.Fatalf("the call took %v after the cancel; the grandchild held it", took)
	}
}

func TestShellTimeout(t *testing.T) {
	env := newEnv(t, t.TempDir())
	_, err := tool.Shell{Grace: 200 * time.Millisecond}.Run(context.Background(), env, shellIn("echo started; sleep 30", 2))
	var te *tool.Error
	if !errors.As(err, &te) || te.Class != tool.ClassTimeout || !strings.Contains(te.Message, "started") {
		t.Fatalf("err %v", err)
	}
}

func TestShellOutputCap(t *testing.T) {
	env := newEnv(t, t.TempDir())
	res, err := tool.Shell{}.Run(context.Background(), env, shellIn("head -c 200000 /dev/zero | tr '\\0' x", 0))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Content, "[stdout truncated: "+strconv.Itoa(200000-tool.MaxShellOutput)+" more bytes not shown]") {
		t.Fatalf("no truncation note in %d bytes", len(res.Content))
	}
	if len(res.Content) > tool.MaxShellOutput+1000 {
		t.Fatalf("content %d bytes", len(res.Content))
	}
}

func TestShellInvalidInput(t *testing.T) {
	env := newEnv(t, t.TempDir())
	for _, in := range []string{`{}`, `{"command": ""}`, `{"command": 5}`, `{"command": "ls", "timeout_s": -1}`, `{"command": "a\u0000b"}`} {
		_, err := tool.Shell{}.Run(context.Background(), env, json.RawMessage(in))
		if tool.ClassOf(err) != tool.ClassInvalidInput {
			t.Errorf("%s: class %q", in, tool.ClassOf(err))
		}
	}
}

// TestShellCancelledBeforeStartSpawnsNothing: a call whose context is
// already done never starts a process.
func TestShellCancelledBeforeStartSpawnsNothing(t *testing.T) {
	env := newEnv(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tool.Shell{}.Run(ctx, env, shellIn("touch ran", 0))
	if tool.ClassOf(err) != tool.ClassCancelled {
		t.Fatalf("class %q", tool.ClassOf(err))
	}
	if _, err := os.Stat(filepath.Join(env.Workspace, "ran")); err == nil {
		t.Fatal("a cancelled call ran its command")
	}
}

// processesRunning counts the live processes whose command line is
// exactly args.
func processesRunning(t *testing.T, args ...string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	want := strings.Join(args, "\x00") + "\x00"
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == want {
			n++
		}
	}
	return n
}

// TestShell100CancelCycles: a hundred cancelled commands, each with two
// background processes, leave none of them running. (The processes are
// told apart from any other test's by their unusual argument.)
func TestShell100CancelCycles(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	env := newEnv(t, t.TempDir())
	sh := tool.Shell{Grace: 100 * time.Millisecond}
	for i := range 100 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			sh.Run(ctx, env, shellIn("sleep 300.25 & sleep 300.25 & echo go > ready"+strconv.Itoa(i)+"; wait", 0))
			close(done)
		}()
		for {
			if _, err := os.Stat(filepath.Join(env.Workspace, "ready"+strconv.Itoa(i))); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-done
		// SIGKILL is delivered asynchronously: a killed process can still
		// be listed for a moment on a loaded machine. One that survives
		// is still there seconds later.
		deadline := time.Now().Add(5 * time.Second)
		for n := processesRunning(t, "sleep", "300.25"); n > 0; n = processesRunning(t, "sleep", "300.25") {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: %d background processes survived the cancel", i, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
