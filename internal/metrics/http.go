package metrics

import "github.com/prometheus/client_golang/prometheus"

// HTTP holds the HTTP server's connection collectors. A nil *HTTP is
// valid and records nothing.
type HTTP struct {
	Connections prometheus.Gauge   // connections open now
	CapReached  prometheus.Counter // times accepting paused because the cap was reached
}

// NewHTTP registers the HTTP server's collectors on r.
func (r *Registry) NewHTTP() *HTTP {
	h := &HTTP{
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "metis_http_connections",
			Help: "HTTP connections open (WebSocket connections included)."}),
		CapReached: prometheus.NewCounter(prometheus.CounterOpts{Name: "metis_http_connection_cap_reached_total",
			Help: "Times --max-connections connections were open, so accepting paused until one closed."}),
	}
	r.reg.MustRegister(h.Connections, h.CapReached)
	return h
}
