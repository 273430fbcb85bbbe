// Package server assembles a metis server from its parts (trace store,
// bus, cost accumulator, model registry, tools, router, agent loop,
// session manager, HTTP API) and runs it: listen, print the ready line,
// prune the trace store, and shut down in order on request.
//
// server is the outermost package below cmd/metis; it may import every
// other package.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/attach"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/checkpoint"
	"github.com/metis-agent/metis/internal/clusternode"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/cost"
	"github.com/metis-agent/metis/internal/delegate"
	"github.com/metis-agent/metis/internal/editor"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/mcp"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/routing"
	"github.com/metis-agent/metis/internal/sandbox"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/sse"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/stream"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
	"github.com/metis-agent/metis/web"
)

// Server is one running metis.
type Server struct {
	Config   config.Config
	Log      *slog.Logger
	Store    *store.Store
	Bus      *bus.Bus
	Sessions *session.Manager
	Models   *model.Registry
	Tools    *tool.Registry
	MCP      *mcp.Manager // MCP servers and their tools (mcp.go)
	Loop     *agent.Loop
	// Permissions is the tool-call policy (docs/permissions.md): the
	// rules of config.yaml and the sandbox's state.
	Permissions *permission.Policy
	Router      *routing.Engine
	Tokens      *attach.Registry
	API         *api.API
	Hub         *hub.Hub
	Stream      *stream.Server
	SSE         *sse.Server
	Metrics     *metrics.Registry
	// Background holds the shell's background commands (background.go).
	Background *tool.Background
	// Sandbox is what the shell sandbox can do here (internal/sandbox);
	// when it is not Active, nothing confines a shell command.
	Sandbox sandbox.Status

	handler  http.Handler
	http     *http.Server
	ln       net.Listener
	stopBg   context.CancelFunc
	bg       sync.WaitGroup
	shutOnce sync.Once
	shutErr  error

	remote      *remote           // token, TLS, public names (remote.go)
	auth        *api.Auth         // the token check, /login and its sessions
	recorded    bool              // <home>/addresses.json written (remote.go)
	httpMetrics *metrics.HTTP     // connections (listen.go)
	sock        *unixSocket       // nil without a socket (socket.go)
	home        *homeLock         // held until Shutdown ends (homelock.go)
	cluster     *clusternode.Node // nil in single-node mode (cluster.go)
	// checkpoints takes the workspace checkpoints (nil when off, and
	// checkpointsWhy then says why if git is missing: checkpoints.go).
	checkpoints    *checkpoint.Store
	checkpointsWhy string
	// defaultWhy says why the default model is what it is (ready line).
	defaultWhy string
}

// New opens the store under cfg.Home and wires every component. It does
// not serve yet, but before it opens the store it binds the unix socket
// (cfg.Socket) and takes the home's lock: a second server on the home of
// a running one fails there, before it could touch the running server's
// database (socket.go, homelock.go).
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (_ *Server, err error) {
	if log == nil {
		log = slog.Default()
	}
	if err := prepareHome(cfg.Home, log); err != nil { // home.go
		return nil, err
	}
	rem, err := setupRemote(cfg, log)
	if err != nil {
		return nil, err
	}
	var sock *unixSocket
	if cfg.Socket != "" {
		if sock, err = listenUnix(cfg.Socket); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				_ = sock.close()
			}
		}()
	}
	// One server per home, also when the socket is off or elsewhere.
	lock, err := lockHome(cfg.Home)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.release()
		}
	}()
	st, err := store.Open(ctx, store.Options{Path: filepath.Join(cfg.Home, "metis.db"), Logger: log})
	if err != nil {
		return nil, err
	}
	s := &Server{Config: cfg, Log: log, Store: st, remote: rem, sock: sock, home: lock}
	// Cluster mode: the bus commits through the log (internal/clusternode).
	var busStore bus.Store = st
	if cfg.NATS != "" {
		if s.cluster, err = clusternode.Start(ctx, cfg, st, log); err != nil {
			st.Close()
			return nil, err
		}
		busStore = s.cluster.Store()
	}
	s.Models = model.NewRegistry()
	var why string
	s.Config.DefaultModel, why = registerModels(ctx, s.Models, cfg, log)
	s.defaultWhy = why
	if err := s.Models.Check(s.Config.DefaultModel); err != nil {
		s.closeCore(ctx)
		_, msg := model.Classify(err)
		return nil, fmt.Errorf("default model: %s", msg)
	}

	s.Bus = bus.New(busStore, bus.Options{Logger: log})
	s.Metrics = metrics.New()
	s.httpMetrics = s.Metrics.NewHTTP()
	s.Hub = hub.New(st, s.Bus, hub.Config{ClientQueue: cfg.ClientQueue, ClientQueueBytes: int64(cfg.ClientQueueBytes), ReplayLimit: cfg.ReplayLimit,
		Retention: cfg.Retention, SnapshotMessages: cfg.SnapshotMessages, RingSize: cfg.StreamRing,
		RingBytes: int64(cfg.StreamRingBytes), WindowBytes: int64(cfg.ReplayWindowBytes),
		Logger: log, Metrics: s.Metrics.Stream,
		Counters: func(ctx context.Context, sid string, desc []string, asOf string) (int, float64, error) {
			return cost.CountersAsOf(ctx, st, sid, desc, asOf)
		},
		PolicyVersion: func() string { return s.Router.Version() }, // set below, before any client
		Emits:         s.hubEmits,
		Forward:       s.forwardMeta,
		Node:          s.nodeName(), // the three: cluster.go
		AwaitCursor:   s.awaitCursor,
		Background:    func(sid string) []protocol.BackgroundCommand { return s.Background.List(sid) }, // set below, before any client
	})
	s.Bus.AddLive(s.Hub)
	if s.cluster != nil {
		s.cluster.StartFeeds(s.Bus, s.Hub.AttachedSessions)
		if err := s.cluster.StartStatus(ctx, s.Metrics); err != nil {
			s.closeCore(ctx)
			return nil, err
		}
	}
	prices := price.NewTable(cfg.Prices, log)
	if err := cost.StartAccumulator(ctx, s.Bus, st); err != nil {
		s.closeCore(ctx)
		return nil, err
	}
	router, err := routing.NewEngine(filepath.Join(cfg.Home, "routing.yaml"), log, func(c routing.Change) { s.announcePolicy(c) })
	if err != nil {
		s.closeCore(ctx)
		return nil, fmt.Errorf("routing policy: %w", err)
	}
	s.Router = router
	s.Tools = tool.NewRegistry(tool.Builtins()...)
	s.startSandbox()                 // sandbox.go
	s.Background = s.newBackground() // background.go
	s.Tools.Register(tool.Shell{ExtraEnv: cfg.ToolEnv, Sandbox: sandboxSettings(cfg), Background: s.Background})
	if cfg.BackgroundCommands > 0 {
		s.Tools.Register(tool.ShellOutput{Background: s.Background})
		s.Tools.Register(tool.ShellKill{Background: s.Background})
	}
	s.Tools.Register(tool.WebFetch{AllowPrivate: cfg.WebFetchAllowPrivate})
	s.Tools.SetOffer(cfg.EditTools.Offers)
	// The policy knows whether a sandbox confines shell commands: where
	// none can (no Landlock), commands ask in every mode, auto included,
	// unless a rule allows them (test harnesses may set the state).
	s.Permissions = permission.NewPolicy(cfg.Permissions)
	s.Permissions.SetSandbox(policySandbox(cfg.ShellSandbox, s.Sandbox)) // sandbox.go
	s.MCP = newMCP(cfg, st, log)                                         // mcp.go
	var mgr *session.Manager
	limits := price.NewLimits(cfg.Models)
	lcfg := longSessionConfig(cfg, limits) // windows.go
	lcfg.Models, lcfg.Tools, lcfg.Prices, lcfg.Logger = s.Models, s.Tools, prices, log
	lcfg.MaxTokens, lcfg.ThinkingBudget = cfg.MaxOutputTokens, cfg.ThinkingBudget
	lcfg.Images = st
	lcfg.ApprovalTimeout = cfg.ApprovalTimeout
	lcfg.ToolSource = s.MCP
	editors := editor.New(0) // the editors clients attach (docs/editors.md)
	lcfg.Editor = editors
	lcfg.History = agent.HistoryFunc(func(ctx context.Context, id string) ([]message.Message, error) {
		return mgr.Conversation(ctx, id)
	})
	cps, why := s.openCheckpoints(ctx) // checkpoints.go
	s.checkpointsWhy, lcfg.CheckpointsUnavailable = why, why
	if cps != nil {
		lcfg.Checkpoints = cps
	}
	loop := agent.New(lcfg)
	s.Loop = loop
	mgr = session.New(session.Config{Store: st, Bus: s.Bus, Loop: loop, Router: router, Models: s.Models,
		DefaultModel: s.Config.DefaultModel, TurnTimeout: cfg.TurnTimeout, Logger: log,
		MaxTurnCostUSD: cfg.MaxTurnCost, MaxSessionCostUSD: cfg.MaxSessionCost,
		MaxQueuedTurns: cfg.MaxQueuedTurns, MaxImages: cfg.MaxImages, Images: images.Limits{MaxBytes: cfg.MaxImageBytes},
		Policy: s.Permissions, DefaultMode: cfg.DefaultMode, ApprovalTimeout: cfg.ApprovalTimeout,
		Checkpoints: cps, CheckpointsUnavailable: why, Background: s.Background.List, EndBackground: s.Background.EndSessionFor,
		Runs: s.emits, Deleter: s.deleter()})
	s.Sessions = mgr
	if s.cluster != nil {
		s.cluster.SetSessions(mgr)
		s.cluster.SetMCP(s.MCP) // a session's own MCP servers run on its tree's owner
	}
	s.Tools.Register(&delegate.Tool{Sessions: mgr, Store: st, Bus: s.Bus, Models: s.Models})
	// In cluster mode a turn left open may belong to a tree another node
	// owns: the node ends only those of the trees it takes over
	// (cluster.go).
	if err := s.recover(ctx, mgr); err != nil {
		s.closeCore(ctx)
		return nil, err
	}
	s.reportLostBackground() // background.go
	s.Tokens = attach.NewRegistry(0, nil)
	s.API = api.New(mgr, s.Tokens, log)
	s.API.MountEditor(editors)
	s.Stream = stream.New(s.Hub, s.Tokens, s.streamCanceller(mgr), stream.Config{PingInterval: cfg.PingInterval, PingMisses: cfg.PingMisses,
		WriteTimeout: cfg.WriteTimeout, OverflowGrace: cfg.OverflowGrace, Logger: log, Metrics: s.Metrics.Stream})
	s.API.Route("/sessions/{id}/stream", map[string]http.HandlerFunc{"GET": s.Stream.ServeHTTP})
	// The SSE stream: the same subscription over plain HTTP (docs/protocol.md).
	s.SSE = sse.New(s.Hub, sse.Config{PingInterval: cfg.PingInterval, WriteTimeout: cfg.WriteTimeout, OverflowGrace: cfg.OverflowGrace,
		Logger: log, Metrics: s.Metrics.Stream})
	s.API.Route("/sessions/{id}/events", map[string]http.HandlerFunc{"GET": s.SSE.ServeHTTP})
	s.API.Route("/metrics", map[string]http.HandlerFunc{"GET": s.Metrics.Handler().ServeHTTP})
	s.API.Route("/cluster", map[string]http.HandlerFunc{"GET": s.clusterStatus()}) // cluster.go
	s.API.MountMCP(s.MCP)
	// The dashboard answers "/" and its assets; every other path is the
	// API's. Everything on this chain passes the guard and then the token
	// check (when the token is required).
	apiHandler := s.clusterFront(s.API)
	// Login sessions live in this node's own store (remote.go).
	if s.auth, err = api.NewAuth(ctx, api.AuthConfig{Token: rem.token, TLS: rem.tls != nil, Logins: st, Log: log}); err != nil {
		s.closeCore(ctx)
		return nil, err
	}
	s.handler = rem.guard(cfg.Addr).Wrap(s.auth.Wrap(web.Handler(apiHandler)))

	bgctx, stop := context.WithCancel(context.Background())
	s.stopBg = stop
	s.bg.Add(6)
	go func() {
		defer s.bg.Done()
		sandbox.WatchEscaped(bgctx)
		learnWindows(bgctx, s.Models, cfg, limits, log) // windows.go
	}()
	go s.pruneLoop(bgctx)
	go s.checkpointGCLoop(bgctx) // checkpoints.go
	go s.sweepLoop(bgctx)
	go func() {
		defer s.bg.Done()
		router.Watch(bgctx, cfg.RoutingPoll)
	}()
	go func() {
		defer s.bg.Done()
		s.MCP.Watch(bgctx, cfg.MCPPoll)
	}()
	return s, nil
}

// Handler returns the guarded HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen binds cfg.Addr and starts serving; it returns the base URL.
// With cfg.Socket set it also listens on that unix socket (listen.go).
func (s *Server) Listen() (string, error) {
	if err := s.listen(); err != nil {
		return "", err
	}
	if err := s.recordAddresses(); err != nil { // remote.go
		return "", err
	}
	url := s.scheme() + "://" + s.ln.Addr().String()
	if s.cluster != nil {
		s.cluster.Listening(url) // announced in the node directory
	}
	return url, nil
}

// shutdownTimeout bounds Run's shutdown: every step of it together.
const shutdownTimeout = 15 * time.Second

// Run listens, prints the ready line to out, and serves until ctx is
// done; then it shuts down in order and returns.
func (s *Server) Run(ctx context.Context, out io.Writer) error {
	url, err := s.Listen()
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = s.Shutdown(sctx)
		return err
	}
	fmt.Fprintf(out, "metis serving %s (home %s; default model %s: %s; %s%s); dashboard %s/%s%s\n", url, s.Config.Home, s.Config.DefaultModel, s.defaultWhy, s.Sandbox, s.checkpointNote(), url, s.socketNote(), s.remote.readyNote(s.ln.Addr().String())+s.clusterNote())
	// Package initialisation and startup (the SDKs' type registrations,
	// the terminal UI renderer's tables, the store's migrations) leave
	// garbage an idle server never reuses: collect it and give its pages
	// back to the system now, not whenever the background scavenger gets
	// to them (docs/benchmarks.md, "A lean idle server").
	debug.FreeOSMemory()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return s.Shutdown(sctx)
}

// Shutdown cancels in-flight turns with reason server_shutdown, waits for
// them, stops HTTP, drains the bus and flushes the store. Every wait is
// bounded by ctx: a piece that does not finish in time (a tool ignoring
// its cancellation, a wedged subscriber or store writer) is left behind,
// the remaining steps are still started, and Shutdown returns by ctx's
// deadline with an error naming what did not finish. It is safe to call
// more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() {
		var errs []error
		step := func(name string, f func() error) {
			if err := bounded(ctx, name, f); err != nil {
				errs = append(errs, err)
			}
		}
		if s.cluster != nil {
			s.cluster.StopFailover() // take no tree over while stopping
		}
		step("sessions", func() error { return s.Sessions.Shutdown(ctx) })
		// Background commands outlive turns, not the server: stop them
		// and emit their ends while the bus still takes events.
		step("background commands", func() error { return s.Background.Close(ctx) })
		// No turn runs now: stop the MCP servers, each process group.
		step("mcp servers", func() error { return s.MCP.Close(ctx) })
		// Every event of the cancelled turns reaches the clients' queues,
		// then each connection flushes its queue and closes with 1001.
		step("bus flush", func() error { return s.Bus.Flush(ctx) })
		step("stream close", func() error { return s.Stream.Close(ctx) })
		step("sse close", func() error { return s.SSE.Close(ctx) })
		if s.http != nil {
			step("http shutdown", func() error {
				err := s.http.Shutdown(ctx)
				if err != nil {
					_ = s.http.Close() // drop the connections still open
				}
				return err
			})
		}
		if s.sock != nil {
			step("unix socket", s.sock.close)
		}
		if s.auth != nil {
			s.auth.Close() // the last summary of refused logins
		}
		s.stopBg()
		step("background tasks", func() error { s.bg.Wait(); return nil })
		errs = append(errs, s.closeCore(ctx))
		s.forgetAddresses()
		s.home.release()
		s.shutErr = errors.Join(errs...)
	})
	return s.shutErr
}

// bounded runs f and returns its error, or an error naming the step as
// soon as ctx is done if f has not returned by then. f then goes on in
// the background: a step that ignores ctx cannot hold the shutdown past
// its deadline. f is started even when ctx is already done, so later
// steps (closing the store) still get their chance.
func bounded(ctx context.Context, name string, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	case <-ctx.Done():
		select {
		case err := <-done: // finished just as ctx ended
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		default:
		}
		return fmt.Errorf("%s: did not finish before the shutdown deadline: %w", name, ctx.Err())
	}
}

// closeCore closes the bus, then the store, each bounded by ctx.
func (s *Server) closeCore(ctx context.Context) error {
	var errs []error
	if s.Bus != nil {
		if err := bounded(ctx, "bus close", func() error { return s.Bus.Close(ctx) }); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cluster != nil {
		if err := bounded(ctx, "cluster close", func() error { return s.cluster.Close(ctx) }); err != nil {
			errs = append(errs, err)
		}
	}
	if err := bounded(ctx, "store close", s.Store.Close); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Hub sweeping: the state (ring included) of a session with no client,
// no turn in flight and no event for hubIdle is dropped.
const (
	sweepInterval = time.Minute
	hubIdle       = 10 * time.Minute
)

func (s *Server) sweepLoop(ctx context.Context) {
	defer s.bg.Done()
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := s.Hub.Sweep(hubIdle); n > 0 {
				s.Log.Debug("hub: dropped idle sessions", "sessions", n)
			}
		}
	}
}

// pruneInterval is how often the trace store is pruned to --retention.
const pruneInterval = time.Hour

func (s *Server) pruneLoop(ctx context.Context) {
	defer s.bg.Done()
	t := time.NewTicker(pruneInterval)
	defer t.Stop()
	for {
		r, err := s.Prune(ctx, time.Now().Add(-s.Config.Retention))
		if err != nil && ctx.Err() == nil {
			s.Log.Error("prune trace store", "err", err)
		} else if r.Events > 0 || r.Sessions > 0 {
			s.Log.Info("pruned trace store", "events", r.Events, "sessions", r.Sessions, "freed_bytes", r.FreedBytes, "retention", s.Config.Retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// announcePolicy tells the sessions that have clients attached that the
// routing policy changed (routing.policy_reloaded), or that a new
// routing.yaml was refused and the previous policy stays
// (bus.handler_warning).
func (s *Server) announcePolicy(c routing.Change) {
	if s.Hub == nil {
		return
	}
	for _, sid := range s.Hub.AttachedSessions() {
		if !s.emits(sid) {
			continue // cluster mode: the tree's owner announces its own policy
		}
		if c.Err != nil {
			s.Bus.Warn(sid, "routing", "routing_policy_invalid", map[string]any{"path": c.Path, "error": c.Err.Error(), "policy_version": c.Version})
			continue
		}
		em, err := s.Bus.Emitter(context.Background(), sid)
		if err == nil {
			_, err = em.Emit(bus.Spec{Type: event.RoutingPolicyReloaded, Actor: event.ActorRouter,
				Payload: map[string]string{"policy_version": c.Version, "path": c.Path}})
		}
		if err != nil {
			s.Log.Warn("announce routing policy", "session", sid, "err", err)
		}
	}
}
