package benchtest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/benchtest"
)

// TestDialSubscribesAndReturnsTheAck: Dial attaches, sends a subscribe
// frame with the types and since, without a snapshot, and returns the
// raw subscribe_ack.
func TestDialSubscribesAndReturnsTheAck(t *testing.T) {
	f := startFakeMetis(t, 2)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	ws, ack, err := benchtest.Dial(t.Context(), hc, f.srv.URL, "sess_a", []string{"text.delta", "turn.started"}, "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if !strings.Contains(string(ack), `"replay_event_count":2`) {
		t.Errorf("ack %s", ack)
	}
	f.mu.Lock()
	sub := f.subs[0]
	f.mu.Unlock()
	filter, _ := sub["filter"].(map[string]any)
	types, _ := filter["event_types"].([]any)
	if sub["type"] != "subscribe" || sub["snapshot"] != false || sub["since"] != "evt_1" || len(types) != 2 || types[0] != "text.delta" {
		t.Errorf("subscribe frame %v", sub)
	}

	// No since: null.
	ws2, _, err := benchtest.Dial(t.Context(), hc, f.srv.URL, "sess_a", []string{"text.delta"}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ws2.CloseNow()
	f.mu.Lock()
	since, has := f.subs[1]["since"]
	f.mu.Unlock()
	if !has || since != nil {
		t.Errorf("since %v (present %v), want null", since, has)
	}
}

// TestDialFailsClearly: a 404 is ErrNotFound, an answer other than a
// subscribe_ack is an error naming it, a cancelled context stops it.
func TestDialFailsClearly(t *testing.T) {
	f := startFakeMetis(t, 1)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	if _, _, err := benchtest.Dial(t.Context(), hc, f.srv.URL, "sess_missing", nil, ""); !errors.Is(err, benchtest.ErrNotFound) {
		t.Errorf("missing session: %v, want ErrNotFound", err)
	}
	_, _, err := benchtest.Dial(t.Context(), hc, f.srv.URL, "sess_refused", nil, "")
	if err == nil || !strings.Contains(err.Error(), "bad_request") {
		t.Errorf("refused subscribe: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := benchtest.Dial(ctx, hc, f.srv.URL, "sess_a", nil, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
