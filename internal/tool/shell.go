package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/metis-agent/metis/internal/model"
)

// Shell limits.
const (
	// DefaultShellTimeout applies when the call gives no timeout_s.
	DefaultShellTimeout = 2 * time.Minute
	// MaxShellTimeout caps timeout_s.
	MaxShellTimeout = time.Hour
	// MaxShellOutput caps what is kept of stdout and of stderr, each.
	MaxShellOutput = 64 << 10
	// DefaultKillGrace is the pause between SIGTERM and SIGKILL.
	DefaultKillGrace = 2 * time.Second
)

// Shell runs a command with /bin/sh in the workspace.
//
// On Linux the shell runs under a supervisor (see supervisor_linux.go), a
// child subreaper that every process the command starts stays under,
// even one that leaves the process group or session (setsid, setpgrp, a
// double fork). When the call is cancelled or times out, every such
// process gets SIGTERM, then SIGKILL after Grace; when the shell exits,
// every process it left gets SIGKILL; the call ends only once all of
// them have been reaped. Elsewhere the command runs in a process group
// of its own and only that group is signalled.
//
// The shell gets the environment ToolEnviron builds, never the server's
// own. Output is read until the command exits plus Grace
// (exec.Cmd.WaitDelay). The child is always reaped.
type Shell struct {
	// Grace is the pause between SIGTERM and SIGKILL (0: DefaultKillGrace).
	Grace time.Duration
	// ExtraEnv names variables of the server's environment to pass to
	// the command besides the allow-list; names IsSecretEnv refuses are
	// never passed.
	ExtraEnv []string
}

// Spec implements Tool.
func (Shell) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "shell",
		Description: "Run a shell command (/bin/sh -c) in the workspace directory. Returns the exit code, stdout and stderr (each cut at 64 KiB). " + shellProcessNote + " The environment holds only PATH, HOME, USER, locale and terminal settings (and configured additions): no credentials.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout_s":{"type":"number","description":"seconds before the command is stopped (default 120, at most 3600)"}},"required":["command"]}`)}
}

// Run implements Tool.
func (s Shell) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	var in struct {
		Command  string   `json:"command"`
		TimeoutS *float64 `json:"timeout_s"`
	}
	if err := decodeInput(input, &in); err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(in.Command) == "" {
		return Result{}, Errorf(ClassInvalidInput, "command is required")
	}
	if strings.ContainsRune(in.Command, 0) {
		return Result{}, Errorf(ClassInvalidInput, "command contains a NUL byte")
	}
	timeout := DefaultShellTimeout
	if in.TimeoutS != nil {
		if *in.TimeoutS <= 0 {
			return Result{}, Errorf(ClassInvalidInput, "timeout_s must be positive")
		}
		timeout = min(time.Duration(*in.TimeoutS*float64(time.Second)), MaxShellTimeout)
	}
	grace := s.Grace
	if grace <= 0 {
		grace = DefaultKillGrace
	}

	var stdout, stderr capped
	stdout.max, stderr.max = MaxShellOutput, MaxShellOutput
	cmd, supervised := shellCommand(in.Command, grace)
	cmd.Dir = env.Workspace
	cmd.Env = s.environ()
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = grace
	if err := ctx.Err(); err != nil {
		return Result{}, err // never start a process for a cancelled call
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, Errorf(ClassExecution, "could not start the shell: %v", err)
	}
	pid := cmd.Process.Pid // also the process group's id
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var stopped error // why the command was stopped, if it was
	var err error
	select {
	case err = <-waited:
	case <-ctx.Done():
		stopped = ctx.Err()
	case <-timer.C:
		stopped = Errorf(ClassTimeout, "the command ran longer than %s and was stopped", timeout)
	}
	if stopped != nil {
		if supervised {
			err = stopSupervisor(pid, grace, waited)
		} else {
			err = stopGroup(pid, grace, waited)
		}
	}
	// The command is done; whatever it left in its group goes too, before
	// the call is reported as ended. (The supervisor has already killed
	// every descendant, in the group or not, unless it had to be killed.)
	killGroup(pid)

	out := shellOutput(cmd, err, &stdout, &stderr, time.Since(start))
	if stopped != nil {
		if te := (*Error)(nil); errors.As(stopped, &te) {
			te.Message += "\n" + out.Content
			return Result{}, te
		}
		return Result{}, stopped
	}
	return out, nil
}

// stopSupervisor asks the supervisor to stop the command (SIGTERM: it
// passes SIGTERM on to every descendant, SIGKILL after grace, and exits
// once all are gone) and returns its Wait error. A supervisor that has
// not exited by grace plus supervisorMargin is killed with its group.
func stopSupervisor(pid int, grace time.Duration, waited <-chan error) error {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	t := time.NewTimer(grace + supervisorMargin)
	defer t.Stop()
	select {
	case err := <-waited:
		return err
	case <-t.C:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return <-waited
	}
}

// stopGroup sends SIGTERM to the group, then SIGKILL after grace, and
// returns the command's Wait error.
func stopGroup(pgid int, grace time.Duration, waited <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-waited:
		return err
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return <-waited
	}
}

func shellOutput(cmd *exec.Cmd, err error, stdout, stderr *capped, took time.Duration) Result {
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "exit code: %d\n", code)
	if errors.Is(err, exec.ErrWaitDelay) {
		b.WriteString("note: a background process kept the output open; it was closed after the command exited\n")
	}
	for _, o := range []struct {
		name string
		c    *capped
	}{{"stdout", stdout}, {"stderr", stderr}} {
		text, cut := o.c.result()
		fmt.Fprintf(&b, "%s:\n%s", o.name, text)
		if !strings.HasSuffix(text, "\n") && text != "" {
			b.WriteByte('\n')
		}
		if cut > 0 {
			fmt.Fprintf(&b, "[%s truncated: %d more bytes not shown]\n", o.name, cut)
		}
	}
	return Result{Content: b.String(), Summary: fmt.Sprintf("exit %d in %s", code, took.Round(time.Millisecond))}
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.buf.Len()
	if room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	if len(p) > room {
		c.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

func (c *capped) result() (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.ToValidUTF8(c.buf.String(), "\uFFFD"), c.dropped
}
