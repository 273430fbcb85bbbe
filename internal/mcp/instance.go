package mcp

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metis-agent/metis/protocol"
)

// Restarts: after the n-th failure in a row (a start that failed, or an
// exit or lost connection less than stableAfter after the start) a
// server is started again after backoff(n): 500 ms, doubling, at most
// 30 s. After maxFailures in a row it is left failed until a turn needs
// it again, and not before its retry time.
const (
	firstBackoff = 500 * time.Millisecond
	maxBackoff   = 30 * time.Second
	maxFailures  = 5
	stableAfter  = 30 * time.Second
	pingTimeout  = 5 * time.Second
	listTimeout  = 30 * time.Second
)

func backoff(failures int) time.Duration {
	d := firstBackoff
	for i := 1; i < failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// instance is one server and its lifecycle: a supervisor goroutine,
// started when a turn first needs the server, connects it, lists its
// tools, relists them on notifications/tools/list_changed, checks the
// connection after a failed call, and restarts the server with backoff
// when it dies, until the instance is stopped.
type instance struct {
	m   *Manager
	cfg ServerConfig
	key string // sessions with the same server share one instance
	log *slog.Logger

	listReq chan struct{} // a tools/list_changed arrived
	suspect chan struct{} // a call failed on the connection: check it

	mu       sync.Mutex
	state    string
	changed  chan struct{} // closed and replaced on every change
	conn     *conn
	tools    []*Tool
	toolInfo []protocol.MCPToolStatus
	failures int
	restarts int
	started  bool // started at least once
	lastErr  string
	lastErrT time.Time
	upSince  time.Time
	retryAt  time.Time
	lastUsed time.Time
	sessions map[string]bool // session scope: the sessions using it

	running bool // the supervisor goroutine
	stopSup context.CancelFunc
	supDone chan struct{}
	closed  bool // stopped for good
}

func newInstance(m *Manager, c ServerConfig, key string) *instance {
	i := &instance{m: m, cfg: c, key: key, log: m.log.With("mcp_server", c.Name, "scope", c.Scope),
		listReq: make(chan struct{}, 1), suspect: make(chan struct{}, 1), changed: make(chan struct{}),
		sessions: map[string]bool{}}
	switch {
	case c.Problem != "":
		i.state, i.lastErr, i.lastErrT = protocol.MCPStateInvalid, c.Problem, time.Now()
	case c.Disabled:
		i.state = protocol.MCPStateDisabled
	default:
		i.state = protocol.MCPStateIdle
	}
	return i
}

// setLocked changes the state (i.mu held) and wakes every waiter.
func (i *instance) setLocked(state string) {
	i.state = state
	close(i.changed)
	i.changed = make(chan struct{})
	i.m.bump()
}

func (i *instance) errLocked(msg string) {
	i.lastErr, i.lastErrT = msg, time.Now()
	i.log.Warn("mcp server: " + msg)
}

// ensure starts the server if a turn may start it now (idle, stopped
// for idleness, or failed with its retry time passed) and waits, within
// ctx and its start timeout, while it starts.
func (i *instance) ensure(ctx context.Context) {
	i.mu.Lock()
	i.lastUsed = time.Now()
	if !i.closed && !i.running {
		switch i.state {
		case protocol.MCPStateIdle, protocol.MCPStateStopped:
			i.startLocked()
		case protocol.MCPStateFailed:
			if !time.Now().Before(i.retryAt) {
				i.startLocked()
			}
		}
	}
	if i.state != protocol.MCPStateStarting {
		i.mu.Unlock()
		return
	}
	t := time.NewTimer(i.cfg.StartTimeout + time.Second)
	defer t.Stop()
	for i.state == protocol.MCPStateStarting {
		ch := i.changed
		i.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-t.C:
			return
		}
		i.mu.Lock()
	}
	i.mu.Unlock()
}

func (i *instance) startLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	i.stopSup, i.supDone, i.running = cancel, make(chan struct{}), true
	if i.started {
		i.restarts++
	}
	i.started = true
	i.setLocked(protocol.MCPStateStarting)
	go i.supervise(ctx, i.supDone)
}

// supervise runs the server until ctx is done (see instance).
func (i *instance) supervise(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		sctx, cancel := context.WithTimeout(ctx, i.cfg.StartTimeout)
		c, err := dial(sctx, i.cfg, environ(i.m.opts.ToolEnv, i.cfg.Env), i.log, i.clientOptions())
		if err == nil {
			if err = i.list(sctx, c); err != nil {
				c.close(errEnded)
			}
		}
		cancel()
		if ctx.Err() != nil {
			if c != nil && err == nil {
				c.close(errStopped)
			}
			i.stopped()
			return
		}
		if err == nil {
			why := i.serve(ctx, c)
			if ctx.Err() != nil {
				c.close(errStopped)
				i.stopped()
				return
			}
			c.close(errEnded)
			if ctx.Err() != nil {
				i.stopped()
				return
			}
			err = errorString(why)
		} else {
			err = errorString("start failed: " + err.Error())
		}
		delay, again := i.failed(err.Error())
		if !again || !sleep(ctx, delay) {
			if ctx.Err() != nil {
				i.stopped()
			}
			return
		}
		i.mu.Lock()
		i.restarts++
		i.setLocked(protocol.MCPStateStarting)
		i.mu.Unlock()
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func (i *instance) clientOptions() *sdk.ClientOptions {
	return &sdk.ClientOptions{
		// No roots, sampling or elicitation: a server must not expect
		// them (docs/mcp.md, "Not supported yet").
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case i.listReq <- struct{}{}:
			default:
			}
		},
		Logger: slog.New(discardHandler{}),
	}
}

// failed records a failure (a start that failed, or a connection that
// ended) and returns when to start again, or false when the server is
// left failed.
func (i *instance) failed(msg string) (time.Duration, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.upSince.IsZero() && time.Since(i.upSince) >= stableAfter {
		i.failures = 0
	}
	i.failures++
	i.upSince = time.Time{}
	i.conn, i.tools = nil, nil
	delay := backoff(i.failures)
	i.retryAt = time.Now().Add(delay)
	i.errLocked(msg)
	if i.failures >= maxFailures {
		i.running = false
		i.setLocked(protocol.MCPStateFailed)
		return 0, false
	}
	i.setLocked(protocol.MCPStateRestarting)
	return delay, true
}

func (i *instance) stopped() {
	i.log.Info("mcp server stopped")
	i.mu.Lock()
	defer i.mu.Unlock()
	i.conn, i.tools, i.upSince = nil, nil, time.Time{}
	i.running = false
	i.setLocked(protocol.MCPStateStopped)
}

// serve watches a running connection until it ends or ctx is done, and
// returns what ended it.
func (i *instance) serve(ctx context.Context, c *conn) string {
	for {
		select {
		case <-ctx.Done():
			return ""
		case <-c.dead:
			return c.why()
		case <-i.listReq:
			if err := i.list(ctx, c); err != nil {
				select {
				case <-c.dead:
					return c.why()
				default:
				}
				i.mu.Lock()
				i.errLocked("relisting the tools failed: " + err.Error())
				i.m.bump()
				i.mu.Unlock()
			}
		case <-i.suspect:
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := c.session.Ping(pctx, nil)
			cancel()
			if err != nil && ctx.Err() == nil {
				return "the connection failed a check after a failed call: " + err.Error()
			}
		}
	}
}

// list lists the server's tools and makes them the offered set; the
// first time (starting) it also makes the connection the running one.
func (i *instance) list(ctx context.Context, c *conn) error {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	var listed []*sdk.Tool
	if c.info == nil || c.info.Capabilities == nil || c.info.Capabilities.Tools != nil {
		for t, err := range c.session.Tools(lctx, nil) {
			if err != nil {
				return err
			}
			listed = append(listed, t)
			if len(listed) > 10*MaxTools {
				break // a server listing without end
			}
		}
	}
	tools, info := buildTools(i, listed)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.tools, i.toolInfo = tools, info
	if i.conn != c {
		i.conn = c
		i.upSince = time.Now()
		i.setLocked(protocol.MCPStateRunning)
		i.log.Info("mcp server running", "pid", c.pid(), "tools", len(tools))
		return nil
	}
	i.m.bump()
	return nil
}

// current returns the running connection and the tools offered now.
func (i *instance) current() (*conn, []*Tool, string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.conn, i.tools, i.state
}

// checkConn asks the supervisor to check the connection c (a call on it
// failed in a way that may mean it is broken).
func (i *instance) checkConn() {
	select {
	case i.suspect <- struct{}{}:
	default:
	}
}

// awaitNew waits, within ctx, for a running connection other than old.
func (i *instance) awaitNew(ctx context.Context, old *conn) *conn {
	i.mu.Lock()
	defer i.mu.Unlock()
	for {
		if i.conn != nil && i.conn != old && i.state == protocol.MCPStateRunning {
			return i.conn
		}
		if i.closed || !i.running {
			return nil
		}
		ch := i.changed
		i.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			i.mu.Lock()
			return nil
		}
		i.mu.Lock()
	}
}

// stop stops the supervisor (and with it the server) and waits for it,
// within ctx. With forGood the instance never starts again.
func (i *instance) stop(ctx context.Context, forGood bool) error {
	i.mu.Lock()
	i.closed = i.closed || forGood
	cancel, done := i.stopSup, i.supDone
	running := i.running
	i.mu.Unlock()
	if !running {
		i.mu.Lock()
		if forGood && i.state != protocol.MCPStateInvalid && i.state != protocol.MCPStateDisabled {
			i.setLocked(protocol.MCPStateStopped)
		}
		i.mu.Unlock()
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// status reports the instance.
func (i *instance) status() protocol.MCPServerStatus {
	i.mu.Lock()
	defer i.mu.Unlock()
	s := protocol.MCPServerStatus{Name: i.cfg.Name, Scope: i.cfg.Scope, Transport: i.cfg.Transport(), State: i.state,
		Tools: append([]protocol.MCPToolStatus{}, i.toolInfo...), LastError: i.lastErr, Restarts: i.restarts,
		TrustReadOnlyHints: i.cfg.TrustReadOnlyHints}
	switch s.Transport {
	case protocol.MCPTransportStdio:
		s.Command = i.cfg.Command
	case protocol.MCPTransportHTTP:
		s.URL = redactURL(i.cfg.URL)
	}
	if !i.lastErrT.IsZero() {
		t := i.lastErrT.UTC()
		s.LastErrorAt = &t
	}
	if i.conn != nil {
		s.PID = i.conn.pid()
		t := i.upSince.UTC()
		s.StartedAt = &t
		if info := i.conn.info; info != nil {
			s.ProtocolVersion = info.ProtocolVersion
			if info.ServerInfo != nil {
				s.ServerName, s.ServerVersion = info.ServerInfo.Name, info.ServerInfo.Version
			}
		}
	}
	if i.state == protocol.MCPStateRestarting || i.state == protocol.MCPStateFailed {
		t := i.retryAt.UTC()
		s.RetryAt = &t
	}
	for id := range i.sessions {
		s.SessionIDs = append(s.SessionIDs, id)
	}
	sort.Strings(s.SessionIDs)
	return s
}

// sleep waits d or until ctx is done, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// discardHandler drops the SDK's own log records: what matters of them
// (a failed start, a lost connection) reaches the log and the status
// through the errors the SDK returns.
type discardHandler struct{}

func (discardHandler) Enabled(context.Context, slog.Level) bool  { return false }
func (discardHandler) Handle(context.Context, slog.Record) error { return nil }
func (d discardHandler) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discardHandler) WithGroup(string) slog.Handler           { return d }
