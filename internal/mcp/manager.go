package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/safefile"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// DefaultSessionIdle is how long a session's server may go unused
// before it is stopped (it starts again when a turn needs it).
const DefaultSessionIdle = 10 * time.Minute

// Options configure a Manager.
type Options struct {
	// ConfigPath is config.yaml, whose mcp_servers section the manager
	// reads at start and on every change ("": none).
	ConfigPath string
	// ToolEnv names the variables of metis's environment that tools'
	// processes get besides the allow-list (the tool-env setting).
	ToolEnv []string
	// Getenv resolves ${NAME} in config.yaml (nil: os.LookupEnv).
	Getenv Getenv
	// SessionIdle stops a session's server unused this long (0:
	// DefaultSessionIdle).
	SessionIdle time.Duration
	// Parent, if set, returns the session a worker session was
	// delegated from (""for a top session): a worker's turns use the
	// servers set for its planner.
	Parent func(ctx context.Context, sessionID string) string
	Logger *slog.Logger
}

// Manager runs the MCP servers of config.yaml and of sessions, and
// offers their tools (tool.Source).
type Manager struct {
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	config    []*instance            // by name
	configErr string                 // the section could not be read
	sessions  map[string][]*instance // session id → its servers, by name
	shared    map[string]*instance   // key → a session server, shared by sessions
	closed    bool

	vmu      sync.Mutex
	version  uint64
	vchanged chan struct{}
	fileSum  [32]byte
}

var _ tool.Source = (*Manager)(nil)

// ErrClosed is returned once the manager is closed (the server is
// shutting down).
var ErrClosed = errors.New("the server is shutting down")

// New returns a manager with config.yaml's servers (none started yet).
// A bad entry, or a file that cannot be read, is logged and reported by
// Status; it never fails the start.
func New(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Getenv == nil {
		opts.Getenv = os.LookupEnv
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	m := &Manager{opts: opts, log: opts.Logger, sessions: map[string][]*instance{}, shared: map[string]*instance{},
		vchanged: make(chan struct{})}
	m.Reload(context.Background())
	return m
}

// bump marks a change of anything Status reports.
func (m *Manager) bump() {
	m.vmu.Lock()
	defer m.vmu.Unlock()
	m.version++
	close(m.vchanged)
	m.vchanged = make(chan struct{})
}

// Version returns the status version and a channel closed at the next
// change.
func (m *Manager) Version() (uint64, <-chan struct{}) {
	m.vmu.Lock()
	defer m.vmu.Unlock()
	return m.version, m.vchanged
}

// readConfig reads config.yaml's section; ok is false when the file
// could not be read (it is then left as it was).
func (m *Manager) readConfig() (Parsed, [32]byte, bool) {
	if m.opts.ConfigPath == "" {
		return Parsed{}, [32]byte{}, true
	}
	b, err := safefile.ReadRegular(m.opts.ConfigPath, safefile.DefaultLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return Parsed{}, sha256.Sum256(nil), true
	}
	if err != nil {
		return Parsed{Err: "config.yaml could not be read: " + err.Error()}, [32]byte{}, false
	}
	p := ParseConfig(b, m.opts.Getenv)
	return p, sha256.Sum256(b), p.Err == ""
}

// Reload reads config.yaml again and applies its mcp_servers section:
// entries that did not change keep their server (running or not), the
// others are stopped and replaced, and removed ones are stopped. A
// section that cannot be read leaves the servers as they are and is
// reported (Status's config_error). It waits, within ctx, for the
// servers it stops.
func (m *Manager) Reload(ctx context.Context) {
	p, sum, ok := m.readConfig()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	prevErr := m.configErr
	m.configErr = p.Err
	if !ok {
		m.mu.Unlock()
		if p.Err != prevErr {
			m.log.Warn("mcp_servers not reloaded; keeping the servers as they are", "err", p.Err)
			m.bump()
		}
		return
	}
	m.fileSum = sum
	old := map[string]*instance{}
	for _, i := range m.config {
		old[i.cfg.Name] = i
	}
	var next []*instance
	var stop []*instance
	changed := p.Err != prevErr
	for _, c := range p.Servers {
		if i, ok := old[c.Name]; ok && i.cfg.same(c) {
			next = append(next, i)
			delete(old, c.Name)
			continue
		}
		changed = true
		if i, ok := old[c.Name]; ok {
			stop = append(stop, i)
			delete(old, c.Name)
		}
		i := newInstance(m, c, "")
		next = append(next, i)
		if c.Problem != "" {
			m.log.Warn("mcp server entry is invalid; the others are unaffected", "mcp_server", c.Name, "problem", c.Problem)
		} else {
			m.log.Info("mcp server configured", "mcp_server", c.Name, "transport", c.Transport(), "enabled", !c.Disabled)
		}
	}
	for _, i := range old {
		changed = true
		stop = append(stop, i)
		m.log.Info("mcp server removed from the configuration", "mcp_server", i.cfg.Name)
	}
	m.config = next
	m.mu.Unlock()
	stopAll(ctx, stop)
	if changed {
		m.bump()
	}
}

func stopAll(ctx context.Context, insts []*instance) {
	var wg sync.WaitGroup
	for _, i := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = i.stop(ctx, true)
		}()
	}
	wg.Wait()
}

// Watch reloads config.yaml when its contents have changed and then
// stayed the same for one more poll (a file caught half-written is
// never applied), and stops session servers unused for SessionIdle,
// until ctx is done. poll <= 0 disables both.
func (m *Manager) Watch(ctx context.Context, poll time.Duration) {
	if poll <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	m.mu.Lock()
	last := m.fileSum
	m.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.sweep(ctx)
		if m.opts.ConfigPath == "" {
			continue
		}
		sum := m.fileDigest()
		m.mu.Lock()
		applied := m.fileSum
		m.mu.Unlock()
		if sum == applied {
			last = sum
			continue
		}
		if sum != last {
			last = sum // changed: wait one poll for it to settle
			continue
		}
		m.Reload(ctx)
		m.mu.Lock()
		m.fileSum = sum // a file that cannot be read is reported once
		m.mu.Unlock()
	}
}

// fileDigest identifies config.yaml's contents now (or why it cannot be
// read).
func (m *Manager) fileDigest() [32]byte {
	b, err := safefile.ReadRegular(m.opts.ConfigPath, safefile.DefaultLimit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return sha256.Sum256(nil)
	case err != nil:
		return sha256.Sum256([]byte("error: " + err.Error()))
	}
	return sha256.Sum256(b)
}

// sweep stops the session servers no session uses any more, and those
// unused for SessionIdle (they start again when needed).
func (m *Manager) sweep(ctx context.Context) {
	m.mu.Lock()
	var gone, idle []*instance
	for k, i := range m.shared {
		i.mu.Lock()
		unused := len(i.sessions) == 0
		stale := i.running && time.Since(i.lastUsed) > m.opts.SessionIdle
		i.mu.Unlock()
		switch {
		case unused:
			delete(m.shared, k)
			gone = append(gone, i)
		case stale:
			idle = append(idle, i)
		}
	}
	m.mu.Unlock()
	for _, i := range idle {
		i.log.Info("mcp server unused; stopping it until a turn needs it")
		_ = i.stop(ctx, false)
	}
	stopAll(ctx, gone)
	if len(gone) > 0 {
		m.bump()
	}
}

// SetSessionServers makes servers the MCP servers of sessionID (its
// workspace is the default working directory of stdio ones), replacing
// those set before; nil or empty clears them. They add to config.yaml's
// servers for that session's turns (and its workers'), a session server
// taking the place of a configured one of the same name. Sessions given
// the same server share one. It returns the session's view of the
// status.
func (m *Manager) SetSessionServers(ctx context.Context, sessionID, workspace string, servers []protocol.MCPServerConfig) (protocol.MCPStatus, error) {
	cfgs, err := SessionServers(servers, workspace)
	if err != nil {
		return protocol.MCPStatus{}, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return protocol.MCPStatus{}, ErrClosed
	}
	var insts []*instance
	for _, c := range cfgs {
		key := keyOf(c)
		i, ok := m.shared[key]
		if !ok {
			i = newInstance(m, c, key)
			m.shared[key] = i
		}
		insts = append(insts, i)
	}
	for _, i := range m.sessions[sessionID] {
		i.mu.Lock()
		delete(i.sessions, sessionID)
		i.mu.Unlock()
	}
	for _, i := range insts {
		i.mu.Lock()
		i.sessions[sessionID] = true
		i.mu.Unlock()
	}
	if len(insts) == 0 {
		delete(m.sessions, sessionID)
	} else {
		m.sessions[sessionID] = insts
	}
	m.mu.Unlock()
	m.sweep(ctx) // stop what no session uses now
	m.bump()
	return m.SessionStatus(ctx, sessionID), nil
}

// keyOf identifies a session server by everything that configures it.
func keyOf(c ServerConfig) string {
	b, _ := json.Marshal(c)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// serversOf returns the servers of a session's turns: config.yaml's
// (valid and enabled), those set for the session (or, for a worker,
// for its planner) in place of configured ones of the same name, by
// name.
func (m *Manager) serversOf(ctx context.Context, sessionID string) []*instance {
	m.mu.Lock()
	own, ok := m.sessions[sessionID]
	haveSessions := len(m.sessions) > 0
	m.mu.Unlock()
	if !ok && haveSessions && m.opts.Parent != nil {
		for id, depth := sessionID, 0; depth < 16; depth++ {
			if id = m.opts.Parent(ctx, id); id == "" {
				break
			}
			m.mu.Lock()
			own, ok = m.sessions[id]
			m.mu.Unlock()
			if ok {
				break
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byName := map[string]*instance{}
	for _, i := range m.config {
		if i.cfg.Problem == "" && !i.cfg.Disabled {
			byName[i.cfg.Name] = i
		}
	}
	for _, i := range own {
		byName[i.cfg.Name] = i
	}
	out := make([]*instance, 0, len(byName))
	for _, i := range byName {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].cfg.Name < out[b].cfg.Name })
	return out
}

// Tools implements tool.Source: the tools of the session's servers that
// run now. A server not started yet is started, and waited for (within
// ctx and its start timeout), the servers of the session together; one
// that is restarting or failed is left out until it runs again.
func (m *Manager) Tools(ctx context.Context, sessionID string) []tool.Tool {
	insts := m.serversOf(ctx, sessionID)
	var wg sync.WaitGroup
	for _, i := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i.ensure(ctx)
		}()
	}
	wg.Wait()
	var out []tool.Tool
	for _, i := range insts {
		if _, tools, state := i.current(); state == protocol.MCPStateRunning {
			for _, t := range tools {
				out = append(out, t)
			}
		}
	}
	return out
}

// Status reports every server: config.yaml's by name, then the
// session servers by name.
func (m *Manager) Status() protocol.MCPStatus {
	v, _ := m.Version()
	m.mu.Lock()
	insts := append([]*instance{}, m.config...)
	var shared []*instance
	for _, i := range m.shared {
		shared = append(shared, i)
	}
	st := protocol.MCPStatus{Version: v, ConfigError: m.configErr, Servers: []protocol.MCPServerStatus{}}
	m.mu.Unlock()
	sort.Slice(shared, func(a, b int) bool {
		if shared[a].cfg.Name != shared[b].cfg.Name {
			return shared[a].cfg.Name < shared[b].cfg.Name
		}
		return shared[a].key < shared[b].key
	})
	for _, i := range append(insts, shared...) {
		st.Servers = append(st.Servers, i.status())
	}
	return st
}

// SessionStatus reports the servers a session's turns use.
func (m *Manager) SessionStatus(ctx context.Context, sessionID string) protocol.MCPStatus {
	v, _ := m.Version()
	m.mu.Lock()
	st := protocol.MCPStatus{Version: v, ConfigError: m.configErr, Servers: []protocol.MCPServerStatus{}}
	m.mu.Unlock()
	for _, i := range m.serversOf(ctx, sessionID) {
		st.Servers = append(st.Servers, i.status())
	}
	return st
}

// Close stops every server and waits for them, within ctx; no server
// starts afterwards.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	all := append([]*instance{}, m.config...)
	for _, i := range m.shared {
		all = append(all, i)
	}
	m.mu.Unlock()
	var (
		wg   sync.WaitGroup
		emu  sync.Mutex
		errs []error
	)
	for _, i := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := i.stop(ctx, true); err != nil {
				emu.Lock()
				errs = append(errs, fmt.Errorf("mcp server %s: %w", i.cfg.Name, err))
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
