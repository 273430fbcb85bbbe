package stream

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/attach"
	"github.com/metis-agent/metis/internal/feed"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/protocol"
)

// Canceller cancels turns; the session manager implements it.
type Canceller interface {
	Cancel(ctx context.Context, sessionID, turnID, reason string) (session.CancelResult, error)
}

// Config holds the connection limits.
type Config struct {
	PingInterval     time.Duration // idle time before a ping (default 30s)
	PingMisses       int           // unanswered pings before closing (default 3)
	WriteTimeout     time.Duration // longest a single frame write may take (default 10s)
	OverflowGrace    time.Duration // see feed.Config (default feed.OverflowGrace)
	SubscribeTimeout time.Duration // longest wait for the subscribe frame (default 10s)
	Logger           *slog.Logger
	Metrics          *metrics.Stream
}

// Server serves GET /sessions/{id}/stream.
type Server struct {
	cfg    Config
	hub    *hub.Hub
	tokens *attach.Registry
	cancel Canceller
	log    *slog.Logger
	m      *metrics.Stream

	clients *feed.Clients
}

// New returns a stream server.
func New(h *hub.Hub, tokens *attach.Registry, c Canceller, cfg Config) *Server {
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.PingMisses <= 0 {
		cfg.PingMisses = 3
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.SubscribeTimeout <= 0 {
		cfg.SubscribeTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, hub: h, tokens: tokens, cancel: c, log: cfg.Logger, m: cfg.Metrics, clients: feed.NewClients()}
}

// ServeHTTP upgrades GET /sessions/{id}/stream?attach=TOKEN. A missing,
// unknown, expired or used token, or one issued for another session, is
// answered 401 without an upgrade. The request has already passed the
// local-safety guard (Host and Origin).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	if !s.tokens.Redeem(r.URL.Query().Get("attach"), sid) {
		protocol.WriteHTTPError(w, http.StatusUnauthorized, protocol.CodeInvalidAttachToken,
			"the attach token is missing, unknown, expired or already used; GET /sessions/"+sid+" for a fresh one")
		return
	}
	if !s.clients.Join() {
		protocol.WriteHTTPError(w, http.StatusServiceUnavailable, protocol.CodeShuttingDown, "the server is shutting down")
		return
	}
	hj := &batchHijacker{ResponseWriter: w}
	ws, err := websocket.Accept(hj, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.clients.Leave()
		s.log.Debug("websocket accept", "session", sid, "err", err)
		return // Accept has answered
	}
	// The connection is hijacked: net/http is done with it, and the
	// handler returns. The connection runs on a goroutine of its own,
	// which Close waits for (clients). A parked goroutine's stack
	// shrinks only to four times what it uses, and an idle client's
	// goroutine parks for as long as the client stays: under net/http's
	// connection and every middleware it used twice the stack it uses
	// here (BenchmarkIdleConnMemory: 19 KiB of stacks per idle client).
	// What the request set up for the stream (a cluster node's follow
	// of the tree) is released when the connection ends, before Close
	// learns it ended.
	hold := feed.TakeHold(r.Context())
	c := newConn(s, ws, hj.conn, sid)
	go func() {
		defer s.clients.Leave()
		defer hold.Release()
		c.run()
	}()
}

// Close makes every connection flush what is queued and close with 1001
// (going away), refuses new ones, and waits for them (bounded by ctx).
func (s *Server) Close(ctx context.Context) error { return s.clients.Close(ctx) }
