package server_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

func metric(t *testing.T, body, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` ([0-9.e+]+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestMetricsEndpoint: /metrics reports the attached clients, the events
// sent and the delta latency, and carries no session id.
func TestMetricsEndpoint(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := attach(t, h, sid)
	turn := h.Submit(sid, "/echo measured words")
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))

	scrape := func() string {
		resp, err := http.Get(h.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return string(raw)
	}
	// A batch is counted once it is written, which may be just after the
	// client has read it: wait for the count rather than race it.
	var body string
	servertest.WaitFor(t, "the events sent to be counted", func() bool {
		body = scrape()
		return metric(t, body, "metis_stream_events_sent_total") >= float64(len(evs))
	})
	if v := metric(t, body, "metis_stream_clients"); v != 1 {
		t.Errorf("metis_stream_clients %v, want 1", v)
	}
	if v := metric(t, body, "metis_stream_delta_latency_seconds_count"); v < 1 {
		t.Errorf("no delta latency observed")
	}
	if strings.Contains(body, sid) || strings.Contains(body, "sess_") {
		t.Error("a session id appears in /metrics")
	}
}
