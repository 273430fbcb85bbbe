// Package metrics owns the Prometheus collectors of metis, on a registry
// of its own (never the global one), all named metis_*. Labels never
// carry ids (sessions, clients, turns): cardinality stays fixed.
//
// metrics imports the Prometheus client only.
package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Stream holds the streaming server's collectors. A nil *Stream is
// valid and records nothing.
type Stream struct {
	Clients       prometheus.Gauge
	EventsSent    prometheus.Counter
	SlowCloses    prometheus.Counter
	Closes        *prometheus.CounterVec // by close reason code
	ReplayEvents  prometheus.Histogram
	QueueDepth    prometheus.Histogram
	DeltaLatency  prometheus.Histogram
	SubscribeErrs *prometheus.CounterVec // by subscribe_error code
	RingBytes     prometheus.Gauge       // bytes held by every session's streaming ring
	RingEvictions prometheus.Counter     // ring events let go to honour the global cap

	// The replay window (docs/streaming.md, "The replay window").
	WindowBytes     prometheus.Gauge       // bytes held by every session's window
	WindowSessions  prometheus.Gauge       // sessions with a window
	WindowEvictions prometheus.Counter     // windows let go whole to honour the cap
	Replays         *prometheus.CounterVec // replays of catalog events, by source: memory, store or mixed
	ReplayCatalog   *prometheus.CounterVec // catalog events replayed, by source: memory or store
}

// Registry is the server's metric registry.
type Registry struct {
	reg    *prometheus.Registry
	Stream *Stream
}

// New returns a registry with the Go runtime collectors and the stream
// collectors registered.
func New() *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s := &Stream{
		Clients: prometheus.NewGauge(prometheus.GaugeOpts{Name: "metis_stream_clients",
			Help: "Stream clients (WebSocket and SSE) currently attached."}),
		EventsSent: prometheus.NewCounter(prometheus.CounterOpts{Name: "metis_stream_events_sent_total",
			Help: "Event frames written to clients, replay included."}),
		SlowCloses: prometheus.NewCounter(prometheus.CounterOpts{Name: "metis_stream_slow_client_closes_total",
			Help: "Clients closed with 1008 because their queue overflowed."}),
		Closes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metis_stream_closes_total",
			Help: "Connections closed by the server, by reason."}, []string{"reason"}),
		ReplayEvents: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "metis_stream_replay_events",
			Help: "Events replayed per reconnect.", Buckets: []float64{0, 1, 10, 100, 1000, 5000, 10000}}),
		QueueDepth: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "metis_stream_queue_depth",
			Help: "Events waiting in a client's queue when its writer wakes.", Buckets: []float64{0, 1, 4, 16, 64, 256, 1000}}),
		DeltaLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "metis_stream_delta_latency_seconds",
			Help:    "From a text.delta's emission to its write on a client socket.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1}}),
		SubscribeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metis_stream_subscribe_errors_total",
			Help: "Subscribes refused, by code."}, []string{"code"}),
	}
	s.RingBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "metis_stream_ring_bytes",
		Help: "Bytes held by the streaming rings of every session (frames plus a fixed per-event overhead)."})
	s.RingEvictions = prometheus.NewCounter(prometheus.CounterOpts{Name: "metis_stream_ring_evictions_total",
		Help: "Streaming events taken out of session rings to keep them under --stream-ring-bytes."})
	s.WindowBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "metis_stream_replay_window_bytes",
		Help: "Bytes held by the replay windows of every session (frames plus a fixed per-event and per-session overhead)."})
	s.WindowSessions = prometheus.NewGauge(prometheus.GaugeOpts{Name: "metis_stream_replay_window_sessions",
		Help: "Sessions whose recent catalog events are held in a replay window."})
	s.WindowEvictions = prometheus.NewCounter(prometheus.CounterOpts{Name: "metis_stream_replay_window_evictions_total",
		Help: "Replay windows let go whole, least recently used first, to keep them under --replay-window-bytes."})
	s.Replays = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metis_stream_replays_total",
		Help: "Replays of catalog events, by where they were read: memory (the replay window only), store (the trace store only) or mixed."},
		[]string{"source"})
	s.ReplayCatalog = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metis_stream_replay_catalog_events_total",
		Help: "Catalog events replayed, by where they were read: memory (the replay window) or store (the trace store)."},
		[]string{"source"})
	reg.MustRegister(s.Clients, s.EventsSent, s.SlowCloses, s.Closes, s.ReplayEvents, s.QueueDepth, s.DeltaLatency, s.SubscribeErrs,
		s.RingBytes, s.RingEvictions, s.WindowBytes, s.WindowSessions, s.WindowEvictions, s.Replays, s.ReplayCatalog)
	return &Registry{reg: reg, Stream: s}
}

// SandboxInfo records the shell sandbox's state, once at start:
// metis_shell_sandbox_info{state, landlock_abi} 1, state "confined",
// "off" (turned off by the setting) or "unavailable" (the kernel cannot
// enforce it).
func (r *Registry) SandboxInfo(state string, abi int) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "metis_shell_sandbox_info",
		Help: "The shell sandbox's state: confined, off or unavailable, with the kernel's Landlock ABI (0: none)."},
		[]string{"state", "landlock_abi"})
	g.WithLabelValues(state, strconv.Itoa(abi)).Set(1)
	r.reg.MustRegister(g)
}

// Handler serves the registry in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}
