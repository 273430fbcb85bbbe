package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/protocol"
)

// The shell's background mode and the two tools that go with it,
// shell_output and shell_kill (background.go holds the commands).

// runBackground starts command in the background and answers with its
// id at once.
func (s Shell) runBackground(env Env, command string, lifetime, grace time.Duration) (Result, error) {
	c, err := s.Background.start(s, env, command, lifetime, grace)
	if err != nil {
		return Result{}, err
	}
	limit := "it runs until it exits or is stopped with shell_kill"
	if lifetime > 0 {
		limit = fmt.Sprintf("it is stopped after %s unless it ends before", lifetime)
	}
	content := fmt.Sprintf("started background command %s; %s. Read what it prints with shell_output {\"id\": %q}; stop it with shell_kill {\"id\": %q}. It keeps running after this turn ends.", c.id, limit, c.id, c.id)
	return Result{Content: content, Summary: "background " + c.id}, nil
}

// ShellOutput reads what a background command printed since the last
// read.
type ShellOutput struct {
	Background *Background
}

// Spec implements Tool.
func (ShellOutput) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "shell_output",
		Description: "Read what a background command (started by shell with background: true) printed, stdout and stderr together, since the last shell_output of it, and whether it still runs (its exit code once it has ended). Only the last 256 KiB printed between two reads are kept; the answer says how much was dropped.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"the id shell returned (bg_…)"}},"required":["id"]}`)}
}

// Kind implements Classified: reading a command's output changes
// nothing.
func (ShellOutput) Kind() Kind { return KindRead }

// Run implements Tool.
func (t ShellOutput) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	c, err := t.Background.command(env, input)
	if err != nil {
		return Result{}, err
	}
	running := c.running() // before reading: output read after it ended is complete
	out, dropped := c.out.next()
	return backgroundOutput(c, running, out, dropped), nil
}

// ShellKill stops a background command of the session.
type ShellKill struct {
	Background *Background
}

// Spec implements Tool.
func (ShellKill) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "shell_kill",
		Description: "Stop a background command of this session (started by shell with background: true): every process it started gets SIGTERM, then SIGKILL after a grace period. Returns what it printed since the last shell_output and how it ended.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"the id shell returned (bg_…)"}},"required":["id"]}`)}
}

// Kind implements Classified. shell_kill reaches only the session's own
// background commands, started by a shell call the policy allowed, and
// only stops them: it is let through in every mode, as reads are
// (docs/permissions.md).
func (ShellKill) Kind() Kind { return KindRead }

// Run implements Tool.
func (t ShellKill) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	c, err := t.Background.command(env, input)
	if err != nil {
		return Result{}, err
	}
	if c.running() {
		select {
		case c.kill <- protocol.BackgroundKilled:
		default: // already being stopped
		}
		select {
		case <-c.done:
		case <-ctx.Done():
			// The command is still being stopped; it ends on its own.
			return Result{}, ctx.Err()
		}
	}
	out, dropped := c.out.next()
	return backgroundOutput(c, false, out, dropped), nil
}

// command decodes the {id} input of shell_output and shell_kill and
// finds the session's command.
func (b *Background) command(env Env, input json.RawMessage) (*bgCommand, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, Errorf(ClassInvalidInput, "background commands are turned off on this server")
	}
	return b.lookup(env.SessionID, strings.TrimSpace(in.ID))
}

// backgroundOutput is the answer of shell_output and shell_kill: the
// command's state, then its new output.
func backgroundOutput(c *bgCommand, running bool, out []byte, dropped int64) Result {
	var b strings.Builder
	var state string
	switch {
	case running:
		state = fmt.Sprintf("running (for %s)", time.Since(c.startedAt).Round(time.Second))
	case c.exitCode != nil:
		state = fmt.Sprintf("ended (%s), exit code %d", c.endReason, *c.exitCode)
	default:
		state = fmt.Sprintf("ended (%s), stopped by a signal", c.endReason)
	}
	fmt.Fprintf(&b, "%s: %s\n", c.id, state)
	if dropped > 0 {
		fmt.Fprintf(&b, "[%d bytes printed before these were dropped: the buffer keeps the last %d bytes; read more often]\n", dropped, len(c.out.buf))
	}
	if len(out) == 0 {
		b.WriteString("(no new output)\n")
	} else {
		text := strings.ToValidUTF8(string(out), "\uFFFD")
		b.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteByte('\n')
		}
	}
	return Result{Content: b.String(), Summary: fmt.Sprintf("%s %s, %d new bytes", c.id, state, len(out))}
}
