package clustertest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
)

// TestSSEClientOfANonOwnerGetsTheTurn: an SSE client of node B follows
// a session owned by node A; a turn submitted to A reaches it, through
// B's feed, up to turn.completed, with the ids A's bus delivered.
func TestSSEClientOfANonOwnerGetsTheTurn(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL+"/sessions/"+sid+"/events?preset=chat", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("SSE on node b: %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	next := func() map[string]any {
		t.Helper()
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var m map[string]any
				if err := json.Unmarshal([]byte(data), &m); err != nil {
					t.Fatalf("data %q: %v", data, err)
				}
				return m
			}
		}
	}
	if ack := next(); ack["type"] != "subscribe_ack" {
		t.Fatalf("first frame %v", ack)
	}
	turn := a.Submit(sid, "hello from node a")
	var got []string
	for {
		f := next()
		m, ok := f["event"].(map[string]any)
		if f["type"] != "event" || !ok || m["turn_id"] != turn {
			continue
		}
		got = append(got, m["id"].(string))
		if m["type"] == string(event.TurnCompleted) {
			break
		}
	}
	a.WaitTurn(sid)
	want := map[string]bool{}
	for _, e := range a.Live.Events(sid) {
		want[e.ID] = true
	}
	for _, id := range got {
		if !want[id] {
			t.Errorf("node b's SSE client got %s, which node a never delivered", id)
		}
	}
}
