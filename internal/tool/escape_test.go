//go:build linux

package tool_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/tool"
)

// escapes are ways for a command to start a process outside the shell's
// process group. Each starts one process that writes its pid to the file
// g and then sleeps; the command continues once g is written.
var escapes = []struct {
	name, spawn string
	needs       string // a program the escape needs
}{
	{"setsid", `setsid sh -c 'echo $$ > g; exec sleep 300' &`, "setsid"},
	{"setpgrp", `perl -e 'setpgrp(0, 0); open(my $f, ">", "g.tmp") or die; print $f $$; close($f); rename("g.tmp", "g"); exec("sleep", "300")' &`, "perl"},
	{"double fork", `(sh -c 'echo $$ > g; exec sleep 300' &); `, ""},
	{"double fork and setsid ignoring TERM", `(setsid sh -c 'trap "" TERM; echo $$ > g; while :; do sleep 0.05; done' &); `, "setsid"},
}

const waitForG = `while [ ! -s g ]; do sleep 0.01; done; `

// gone reports whether no process, not even a zombie, has the pid.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

func needs(t *testing.T, prog string) {
	t.Helper()
	if prog == "" {
		return
	}
	if _, err := exec.LookPath(prog); err != nil {
		t.Skipf("%s not installed", prog)
	}
}

// TestShellEscapedProcessesEndWithTheCommand: a process that left the
// shell's process group is killed and reaped when the command completes:
// once Run returns there is no trace of it, not even a zombie.
func TestShellEscapedProcessesEndWithTheCommand(t *testing.T) {
	for _, e := range escapes {
		t.Run(e.name, func(t *testing.T) {
			needs(t, e.needs)
			env := newEnv(t, t.TempDir())
			res, err := tool.Shell{Grace: 300 * time.Millisecond}.Run(context.Background(), env, shellIn(e.spawn+waitForG+"echo done", 30))
			if err != nil {
				t.Fatal(err)
			}
			gpid := readPid(t, filepath.Join(env.Workspace, "g"))
			if !gone(gpid) {
				syscall.Kill(gpid, syscall.SIGKILL)
				t.Fatalf("process %d outlived the call (alive: %v)", gpid, alive(gpid))
			}
			if !strings.Contains(res.Content, "exit code: 0") || !strings.Contains(res.Content, "done") {
				t.Fatalf("content %q", res.Content)
			}
		})
	}
}

// TestShellEscapedProcessesEndWithTheCancel: the same processes are
// stopped when the call is cancelled: SIGTERM, then SIGKILL after the
// grace period for one that ignores SIGTERM.
func TestShellEscapedProcessesEndWithTheCancel(t *testing.T) {
	for _, e := range escapes {
		t.Run(e.name, func(t *testing.T) {
			needs(t, e.needs)
			env := newEnv(t, t.TempDir())
			grace := 300 * time.Millisecond
			took, err := runCancelled(t, tool.Shell{Grace: grace}, env, e.spawn+waitForG+"echo $$ > pid; sleep 300", "pid")
			if tool.ClassOf(err) != tool.ClassCancelled {
				t.Fatalf("class %q (%v)", tool.ClassOf(err), err)
			}
			gpid := readPid(t, filepath.Join(env.Workspace, "g"))
			if !gone(gpid) {
				syscall.Kill(gpid, syscall.SIGKILL)
				t.Fatalf("process %d outlived the cancel (alive: %v)", gpid, alive(gpid))
			}
			if took > 10*time.Second {
				t.Errorf("cancel took %v", took)
			}
		})
	}
}

// TestShellTimeoutStopsEscapedProcesses: a timeout stops them too.
func TestShellTimeoutStopsEscapedProcesses(t *testing.T) {
	needs(t, "setsid")
	env := newEnv(t, t.TempDir())
	_, err := tool.Shell{Grace: 200 * time.Millisecond}.Run(context.Background(), env,
		shellIn(escapes[0].spawn+waitForG+"sleep 300", 1))
	if tool.ClassOf(err) != tool.ClassTimeout {
		t.Fatalf("class %q (%v)", tool.ClassOf(err), err)
	}
	if gpid := readPid(t, filepath.Join(env.Workspace, "g")); !gone(gpid) {
		syscall.Kill(gpid, syscall.SIGKILL)
		t.Fatalf("process %d outlived the timeout", gpid)
	}
}
