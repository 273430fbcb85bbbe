package tool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// Background commands: shell with "background": true starts the command
// and returns its id at once; shell_output reads what it printed since
// the last read, shell_kill stops it. A background command runs exactly
// as a foreground one does (the supervisor, the sandbox, the
// environment, a $TMPDIR of its own), but its life is not the call's:
// it belongs to its session and ends when it exits, when shell_kill
// stops it, when it runs past the timeout_s it was given (none by
// default), when its session is deleted, when the server stops, or when
// the server dies (the supervisor's lifeline). Cancelling a turn does
// not stop it.

// Background command limits.
const (
	// DefaultBackgroundCommands is how many background commands a
	// session may run at once unless configured.
	DefaultBackgroundCommands = 4
	// DefaultBackgroundOutput is the size of each command's output
	// buffer unless configured: what it prints past that, unread, is
	// dropped (oldest first) and counted.
	DefaultBackgroundOutput = 256 << 10
	// minBackgroundOutput is the smallest output buffer.
	minBackgroundOutput = 4 << 10
	// keepEnded is how many ended commands a session keeps listed (and
	// readable), the oldest forgotten first.
	keepEnded = 16
)

// Background holds the background commands of every session. The zero
// value allows none (MaxPerSession 0); the server makes one from its
// settings. It is safe for concurrent use.
type Background struct {
	// MaxPerSession bounds the commands running at once in one session;
	// 0 turns background commands off.
	MaxPerSession int
	// OutputBytes is the size of each command's output buffer (0:
	// DefaultBackgroundOutput).
	OutputBytes int
	// Notify, if set, is told when a command starts (before the shell
	// call that started it returns) and when it has ended (every process
	// of it gone), to emit tool.background_started and
	// tool.background_exited. It is called from the goroutine that saw
	// it, never with a lock held.
	Notify func(BackgroundNotice)

	mu     sync.Mutex
	cmds   map[string]*bgCommand // by id
	closed bool
	wg     sync.WaitGroup
}

// BackgroundNotice is a command that started (Exited nil) or ended.
type BackgroundNotice struct {
	SessionID string
	TurnID    string // the turn that started it (started only)
	Started   *protocol.ToolBackgroundStartedPayload
	Exited    *protocol.ToolBackgroundExitedPayload
}

// bgCommand is one background command.
type bgCommand struct {
	id, sessionID, command, toolUseID string
	startedAt                         time.Time // when it was started (set before it is listed)
	out                               *ring
	p                                 *shellProc
	kill                              chan string   // the reason it is stopped for
	ended                             chan struct{} // closed once it has ended (the fields below set)
	done                              chan struct{} // closed after that, once Notify has been told

	// Set once, before ended closes.
	exitCode  *int
	endReason string
	endedAt   time.Time
}

// running reports whether c has not ended yet.
func (c *bgCommand) running() bool {
	select {
	case <-c.ended:
		return false
	default:
		return true
	}
}

// info describes c for the session summary.
func (c *bgCommand) info() protocol.BackgroundCommand {
	i := protocol.BackgroundCommand{ID: c.id, Command: c.command, ToolUseID: c.toolUseID, StartedAt: c.startedAt.UTC(), Running: c.running()}
	if !i.Running {
		i.ExitCode, i.EndReason = c.exitCode, c.endReason
		ended := c.endedAt.UTC()
		i.EndedAt = &ended
	}
	return i
}

// List returns the background commands of a session, running and
// recently ended, oldest first (never nil).
func (b *Background) List(sessionID string) []protocol.BackgroundCommand {
	out := []protocol.BackgroundCommand{}
	for _, c := range b.ofSession(sessionID) {
		out = append(out, c.info())
	}
	return out
}

// Sessions returns the ids of the sessions that have background
// commands listed.
func (b *Background) Sessions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, c := range b.cmds {
		if !slices.Contains(out, c.sessionID) {
			out = append(out, c.sessionID)
		}
	}
	slices.Sort(out)
	return out
}

// ofSession returns a session's commands, oldest first.
func (b *Background) ofSession(sessionID string) []*bgCommand {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*bgCommand
	for _, c := range b.cmds {
		if c.sessionID == sessionID {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(x, y *bgCommand) int {
		if d := x.startedAt.Compare(y.startedAt); d != 0 {
			return d
		}
		return strings.Compare(x.id, y.id)
	})
	return out
}

// lookup returns the command id of the session sessionID. Another
// session's command is not found either: the message is the same, so a
// session learns nothing of another's.
func (b *Background) lookup(sessionID, id string) (*bgCommand, error) {
	if id == "" {
		return nil, Errorf(ClassInvalidInput, "id is required: the id (bg_…) that shell with background: true returned")
	}
	b.mu.Lock()
	c := b.cmds[id]
	b.mu.Unlock()
	if c == nil || c.sessionID != sessionID {
		return nil, Errorf(ClassInvalidInput, "no background command %q in this session%s", truncateForMessage(id), b.known(sessionID))
	}
	return c, nil
}

// known lists a session's command ids, for an error message.
func (b *Background) known(sessionID string) string {
	cs := b.ofSession(sessionID)
	if len(cs) == 0 {
		return "; it has none (start one with shell and background: true)"
	}
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.id
	}
	return fmt.Sprintf("; its background commands are %v", ids)
}

func truncateForMessage(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// start starts command in the background for the session of env.
func (b *Background) start(s Shell, env Env, command string, lifetime, grace time.Duration) (*bgCommand, error) {
	if b == nil || b.MaxPerSession <= 0 {
		return nil, Errorf(ClassInvalidInput, "background commands are turned off on this server (the background-commands setting); run the command in the foreground")
	}
	size := b.OutputBytes
	if size <= 0 {
		size = DefaultBackgroundOutput
	}
	size = max(size, minBackgroundOutput)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, Errorf(ClassExecution, "the server is stopping: no background command can start")
	}
	running := 0
	for _, c := range b.cmds {
		if c.sessionID == env.SessionID && c.running() {
			running++
		}
	}
	if running >= b.MaxPerSession {
		b.mu.Unlock()
		return nil, Errorf(ClassInvalidInput, "this session already runs %d background commands, the most it may; stop one with shell_kill, or let one end (shell_output tells whether it still runs)%s", running, b.known(env.SessionID))
	}
	// Reserve the slot while the process starts: the lock is not held
	// across the fork, and a parallel call must not exceed the limit.
	c := &bgCommand{id: newBackgroundID(), sessionID: env.SessionID, command: command, toolUseID: env.ToolUseID,
		startedAt: time.Now(), out: newRing(size), kill: make(chan string, 1), ended: make(chan struct{}), done: make(chan struct{})}
	if b.cmds == nil {
		b.cmds = map[string]*bgCommand{}
	}
	b.cmds[c.id] = c
	b.wg.Add(1)
	b.mu.Unlock()

	p, err := s.start(env, command, grace, c.out, c.out)
	if err != nil {
		b.mu.Lock()
		delete(b.cmds, c.id)
		b.mu.Unlock()
		b.wg.Done()
		return nil, err
	}
	c.p = p // read by watch only, which starts below
	if b.Notify != nil {
		b.Notify(BackgroundNotice{SessionID: c.sessionID, TurnID: env.TurnID, Started: &protocol.ToolBackgroundStartedPayload{
			BackgroundID: c.id, Command: c.command, ToolUseID: c.toolUseID, StartedAt: c.startedAt.UTC()}})
	}
	go b.watch(c, lifetime)
	return c, nil
}

// watch waits for the command to end, or stops it when told to or when
// its lifetime is over, then records how it ended and tells Notify.
func (b *Background) watch(c *bgCommand, lifetime time.Duration) {
	defer b.wg.Done()
	var expired <-chan time.Time
	if lifetime > 0 {
		t := time.NewTimer(lifetime)
		defer t.Stop()
		expired = t.C
	}
	reason := protocol.BackgroundExited
	select {
	case <-c.p.waited:
	case reason = <-c.kill:
		_ = c.p.stop()
	case <-expired:
		reason = protocol.BackgroundTimeout
		_ = c.p.stop()
	}
	code, reportedOK := c.p.finish()
	if !reportedOK && reason == protocol.BackgroundExited {
		reason = protocol.BackgroundSupervisorKilled
	}
	c.endedAt = time.Now()
	if code >= 0 {
		c.exitCode = &code
	}
	c.endReason = reason
	total, dropped := c.out.counts()
	close(c.ended)
	if b.Notify != nil {
		b.Notify(BackgroundNotice{SessionID: c.sessionID, Exited: &protocol.ToolBackgroundExitedPayload{
			BackgroundID: c.id, Command: c.command, ExitCode: c.exitCode, Reason: reason,
			StartedAt: c.startedAt.UTC(), EndedAt: c.endedAt.UTC(), DurationMS: c.endedAt.Sub(c.startedAt).Milliseconds(),
			OutputBytes: total, DroppedBytes: dropped}})
	}
	close(c.done)
	b.forgetEnded(c.sessionID)
}

// forgetEnded drops a session's oldest ended commands past keepEnded.
func (b *Background) forgetEnded(sessionID string) {
	var ended []*bgCommand
	for _, c := range b.ofSession(sessionID) {
		if !c.running() {
			ended = append(ended, c)
		}
	}
	if len(ended) <= keepEnded {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range ended[:len(ended)-keepEnded] {
		delete(b.cmds, c.id)
	}
}

// stopAll stops the given commands for reason and waits (bounded by
// ctx) until each has ended.
func stopAll(ctx context.Context, cs []*bgCommand, reason string) error {
	for _, c := range cs {
		select {
		case c.kill <- reason:
		default: // already told
		}
	}
	for _, c := range cs {
		select {
		case <-c.done:
		case <-ctx.Done():
			return fmt.Errorf("background commands: %w", ctx.Err())
		}
	}
	return nil
}

// EndSession stops every background command of a session (it was
// deleted), waits until each has ended (bounded by ctx), and forgets
// them.
func (b *Background) EndSession(ctx context.Context, sessionID string) error {
	return b.EndSessionFor(ctx, sessionID, protocol.BackgroundSessionDeleted)
}

// EndSessionFor is EndSession with the reason the commands' ends give
// (protocol.BackgroundSessionDeleted, protocol.BackgroundOwnerLost).
func (b *Background) EndSessionFor(ctx context.Context, sessionID, reason string) error {
	cs := b.ofSession(sessionID)
	err := stopAll(ctx, cs, reason)
	b.mu.Lock()
	for _, c := range cs {
		if !c.running() {
			delete(b.cmds, c.id)
		}
	}
	b.mu.Unlock()
	return err
}

// Close stops every background command (the server stops) and waits
// until each has ended and Notify has been told, bounded by ctx. No
// command starts after Close.
func (b *Background) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	cs := make([]*bgCommand, 0, len(b.cmds))
	for _, c := range b.cmds {
		cs = append(cs, c)
	}
	b.mu.Unlock()
	if err := stopAll(ctx, cs, protocol.BackgroundServerShutdown); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("background commands: %w", ctx.Err())
	}
}

// newBackgroundID returns a fresh command id, "bg_" and 12 hex digits.
func newBackgroundID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "bg_" + hex.EncodeToString(b[:])
}
