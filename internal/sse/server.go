package sse

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	gosse "github.com/tmaxmax/go-sse"

	"github.com/metis-agent/metis/internal/feed"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/protocol"
)

// Config holds the stream's limits.
type Config struct {
	PingInterval time.Duration // idle time before a heartbeat comment (default 30s)
	WriteTimeout time.Duration // longest a write may take (default 10s)
	// OverflowGrace: see feed.Config (default feed.OverflowGrace).
	OverflowGrace time.Duration
	// Retry is the reconnection delay the stream asks clients for (its
	// retry: field; default 2s).
	Retry   time.Duration
	Logger  *slog.Logger
	Metrics *metrics.Stream
}

// DefaultRetry is the reconnection delay a stream asks for by default.
const DefaultRetry = 2 * time.Second

// Server serves GET /sessions/{id}/events.
type Server struct {
	cfg Config
	hub *hub.Hub
	log *slog.Logger

	clients *feed.Clients
}

// New returns an SSE server over the hub.
func New(h *hub.Hub, cfg Config) *Server {
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, hub: h, log: cfg.Logger, clients: feed.NewClients()}
}

// ServeHTTP subscribes with the request's query and Last-Event-ID and
// streams until the client goes, falls behind, or the server closes.
// The request has passed the local-safety guard and the token check.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	sess, err := gosse.Upgrade(w, r)
	if err != nil {
		writeError(w, http.StatusInternalServerError, protocol.CodeInternal, "this connection cannot stream", "")
		return
	}
	sub, err := protocol.DecodeSubscribeRequest(r.URL.RawQuery, r.Header.Values(protocol.HeaderLastEventID))
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, err.Error(), "")
		return
	}
	if !s.clients.Join() {
		writeError(w, http.StatusServiceUnavailable, protocol.CodeShuttingDown, "the server is shutting down", "")
		return
	}
	defer s.clients.Leave()

	att, serr := s.hub.Subscribe(r.Context(), sid, sub)
	if serr != nil {
		refuse(w, serr)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	t := &transport{sess: sess, w: w, rc: http.NewResponseController(w), gone: r.Context().Done(), retry: s.cfg.Retry}
	defer t.finish()
	f := feed.New(t, "sse", sid, feed.Config{PingInterval: s.cfg.PingInterval, WriteTimeout: s.cfg.WriteTimeout,
		OverflowGrace: s.cfg.OverflowGrace, Logger: s.log, Metrics: s.cfg.Metrics})
	defer f.Stop()
	f.Serve(r.Context(), s.hub, att, s.clients.Shutdown())
}

// Close makes every stream flush what is queued and end with the
// server_shutdown close frame, refuses new ones, and waits for them
// (bounded by ctx).
func (s *Server) Close(ctx context.Context) error { return s.clients.Close(ctx) }
