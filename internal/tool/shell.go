package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/sandbox"
	"github.com/metis-agent/metis/protocol"
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
// own, with TMPDIR set to a directory of its own, created for the call
// and removed after it. On Linux the command runs in the sandbox
// (internal/sandbox, docs/sandbox.md) unless its settings turn it off or
// the kernel lacks Landlock. Output is read until the command exits
// plus Grace (exec.Cmd.WaitDelay). The child is always reaped.
type Shell struct {
	// Grace is the pause between SIGTERM and SIGKILL (0: DefaultKillGrace).
	Grace time.Duration
	// ExtraEnv names variables of the server's environment to pass to
	// the command besides the allow-list; names IsSecretEnv refuses are
	// never passed.
	ExtraEnv []string
	// Sandbox are the sandbox's settings. The zero value confines every
	// command where the kernel can.
	Sandbox sandbox.Settings
	// Background holds the background commands ("background": true,
	// background.go); nil allows none.
	Background *Background
}

// Spec implements Tool.
func (s Shell) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "shell",
		Description: "Run a shell command (/bin/sh -c) in the workspace directory. Returns the exit code, stdout and stderr (each cut at 64 KiB). " + shellProcessNote + " The environment holds only PATH, HOME, USER, locale and terminal settings (and configured additions): no credentials. $TMPDIR is a fresh directory, removed after the call." + s.sandboxNote() + s.backgroundNote(),
		InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout_s":{"type":"number","description":"seconds before the command is stopped (default 120, at most 3600; in the background: no limit unless given)"},"background":{"type":"boolean","description":"run it in the background (a dev server, a watcher): returns an id at once; read its output with shell_output, stop it with shell_kill"}},"required":["command"]}`)}
}

// backgroundNote tells the model about background commands, when the
// server allows them.
func (s Shell) backgroundNote() string {
	if s.Background == nil || s.Background.MaxPerSession <= 0 {
		return ""
	}
	return fmt.Sprintf(" With background: true the command runs in the background (same sandbox and environment; its $TMPDIR lives as long as it does) and the call returns its id at once: read what it prints with shell_output, stop it with shell_kill; at most %d run at once per session, and they keep running across turns until they exit or are stopped.", s.Background.MaxPerSession)
}

// sandboxNote tells the model what the sandbox refuses, so that it
// recognises a refusal for what it is.
func (s Shell) sandboxNote() string {
	if s.Sandbox.Off || !sandbox.Probe(true).Available {
		return ""
	}
	net := " and cannot open network connections (TCP)"
	if s.Sandbox.Network {
		net = ""
	}
	return " The command runs in a sandbox: it can write only in the workspace and $TMPDIR (and the tool caches), cannot read the metis home or credential files (~/.ssh, ~/.aws, ...)" + net + "; \"Permission denied\" elsewhere comes from the sandbox."
}

// Run implements Tool.
func (s Shell) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	var in struct {
		Command    string   `json:"command"`
		TimeoutS   *float64 `json:"timeout_s"`
		Background bool     `json:"background"`
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

	if err := ctx.Err(); err != nil {
		return Result{}, err // never start a process for a cancelled call
	}
	if in.Background {
		var lifetime time.Duration // none unless asked for
		if in.TimeoutS != nil {
			lifetime = timeout
		}
		return s.runBackground(env, in.Command, lifetime, grace)
	}
	var stdout, stderr capped
	stdout.max, stderr.max = MaxShellOutput, MaxShellOutput
	var outW, errW io.Writer = &stdout, &stderr
	var live *liveOutput
	if env.Output != nil {
		live = newLiveOutput(env.Output, defaultLiveLimits)
		outW = io.MultiWriter(&stdout, live.writer(protocol.OutputStdout))
		errW = io.MultiWriter(&stderr, live.writer(protocol.OutputStderr))
	}
	p, err := s.start(env, in.Command, grace, outW, errW)
	if err != nil {
		if live != nil {
			live.close()
		}
		return Result{}, err
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var stopped error // why the command was stopped, if it was
	select {
	case err = <-p.waited:
	case <-ctx.Done():
		stopped = ctx.Err()
	case <-timer.C:
		stopped = Errorf(ClassTimeout, "the command ran longer than %s and was stopped", timeout)
	}
	if stopped != nil {
		err = p.stop()
	}
	code, reportedOK := p.finish()
	if live != nil {
		live.close() // the output was read to its end: every delta goes before the call's end
	}
	if !reportedOK && stopped == nil {
		// The supervisor died without reporting: it was killed, and
		// what it supervised was re-parented to this process and
		// swept (report.watch).
		out := shellOutput(-1, err, &stdout, &stderr, time.Since(p.started))
		return Result{}, p.killedSupervisor(out.Content)
	}
	out := shellOutput(code, err, &stdout, &stderr, time.Since(p.started))
	out.ExitCode = &code
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

func shellOutput(code int, err error, stdout, stderr *capped, took time.Duration) Result {
	r := protocol.ShellResult{ExitCode: code}
	if errors.Is(err, exec.ErrWaitDelay) {
		r.Notes = append(r.Notes, "a background process kept the output open; it was closed after the command exited")
	}
	r.Stdout, r.Stderr = stdout.shown("stdout"), stderr.shown("stderr")
	return Result{Content: r.String(), Summary: fmt.Sprintf("exit %d in %s", code, took.Round(time.Millisecond))}
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

// shown is what the result shows of the stream called name: its text,
// ending in a newline when not empty, and a line saying how much was
// cut when the command printed more than the limit. Bytes that are not
// UTF-8 are replaced.
func (c *capped) shown(name string) string {
	c.mu.Lock()
	text, cut := strings.ToValidUTF8(c.buf.String(), "\uFFFD"), c.dropped
	c.mu.Unlock()
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if cut > 0 {
		text += fmt.Sprintf("[%s truncated: %d more bytes not shown]\n", name, cut)
	}
	return text
}
