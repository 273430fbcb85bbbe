package clustertest_test

// Spec §11.1 items 4, 5, 11 and 13 over three nodes: the replay bound,
// cursor retention, filter validation and slow clients, on nodes that
// do not own the tree.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestCluster11_1_11_SlowClientIsolatedPerNode: a client of node 1 that
// never reads (a tiny socket window) overflows its queue while a long
// answer streams; node 1 closes it with client_too_slow (counted there,
// and only there), while a healthy client on each node, and a second
// one on node 1, get the whole turn, exactly what the owner delivered.
// The stalled client's frames are a gap-free prefix of the turn, and
// its stream then ended; every node's store holds the one
// bus.handler_warning about it, which the owner emitted for node 1.
func TestCluster11_1_11_SlowClientIsolatedPerNode(t *testing.T) {
	tri := startTrio(t, withQueue(200))
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		sid := tri.session()
		slow := tri.nodes[1]
		var before [3]float64
		for i, h := range tri.nodes {
			before[i] = counter(t, h.Server.Metrics.Stream.Closes.WithLabelValues("client_too_slow"))
		}
		slowBefore := counter(t, slow.Server.Metrics.Stream.SlowCloses)
		stalled := streamtest.ConnectNarrow(t, tr, slow.URL, sid)
		subscribeOn(t, stalled, "preset:chat", nil, false)

		type result struct {
			node string
			evs  []*protocol.EventEnvelope
			err  error
		}
		results := make(chan result, 4)
		healthy := []*servertest.Harness{tri.nodes[0], tri.nodes[1], tri.nodes[1], tri.nodes[2]}
		for _, h := range healthy {
			c, _, _ := subscribe(t, tr, h, sid, "preset:chat", nil, false)
			go func() {
				r := result{node: h.Config.Node}
				for {
					f, err := c.TryRead(specRead)
					if err != nil {
						r.err = err
						break
					}
					if f.Event != nil {
						r.evs = append(r.evs, f.Event)
						if f.Event.Type == string(event.TurnCompleted) {
							break
						}
					}
				}
				results <- r
			}()
		}
		turn := tri.owner().Submit(sid, "/long 200")
		var all []*protocol.EventEnvelope
		for range healthy {
			r := <-results
			if r.err != nil {
				t.Fatalf("%s's healthy client: %v after %d events", r.node, r.err, len(r.evs))
			}
			tri.sameAsOwner(r.node+"'s healthy client", sid, "", r.evs, streamtest.PresetTypes(event.PresetChat))
			if all == nil {
				all = r.evs
			} else if !slices.Equal(streamtest.IDs(r.evs), streamtest.IDs(all)) {
				t.Fatalf("%s's healthy client got %d events, another %d", r.node, len(r.evs), len(all))
			}
		}
		if last := all[len(all)-1]; last.TurnID == nil || *last.TurnID != turn {
			t.Fatalf("the healthy clients ended with %s %s", last.Type, last.ID)
		}
		tri.owner().WaitTurn(sid)

		eventually(t, "node 1 to close the stalled client as too slow", func() bool {
			return counter(t, slow.Server.Metrics.Stream.Closes.WithLabelValues("client_too_slow")) == before[1]+1
		})
		if n := counter(t, slow.Server.Metrics.Stream.SlowCloses); n != slowBefore+1 {
			t.Errorf("node 1 counted %v slow-client closes, want %v", n, slowBefore+1)
		}
		for _, i := range []int{0, 2} {
			if n := counter(t, tri.nodes[i].Server.Metrics.Stream.Closes.WithLabelValues("client_too_slow")); n != before[i] {
				t.Errorf("%s closed %v clients as too slow", tri.nodes[i].Config.Node, n-before[i])
			}
		}

		var got []*protocol.EventEnvelope
		for {
			f, err := stalled.TryRead(specRead)
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("the stalled client's stream did not end: %v", err)
				}
				if end, ok := streamtest.EndOf(err); ok && (end.Code != 1008 || !strings.Contains(end.Reason, "client_too_slow")) {
					t.Fatalf("the stalled client's stream ended with %d %s", end.Code, end.Reason)
				}
				break
			}
			if f.Event == nil {
				t.Fatalf("the stalled client got %s", f.Raw)
			}
			got = append(got, f.Event)
		}
		if len(got) >= len(all) || !slices.Equal(streamtest.IDs(got), streamtest.IDs(all[:len(got)])) {
			t.Fatalf("the stalled client got %d events; want a proper prefix of the turn's %d", len(got), len(all))
		}
		// Spec §8.2 step 2: the tree holds the slow client's warning,
		// emitted by the owner for node 1, on every node.
		for _, h := range tri.nodes {
			eventually(t, h.Config.Node+" to store the slow client's warning", func() bool {
				evs, err := h.Server.Store.Events(t.Context(), store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.BusHandlerWarning}})
				servertest.Must(t, err)
				n := 0
				for _, ev := range evs {
					var p struct {
						Name   string `json:"subscription_name"`
						Reason string `json:"reason"`
					}
					servertest.Must(t, ev.DecodePayload(&p))
					if p.Reason == protocol.ReasonClientTooSlow.Code && strings.HasSuffix(p.Name, "@node-1") {
						n++
					}
				}
				return n == 1
			})
		}
	})
}

// counter reads a counter.
func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	servertest.Must(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// TestCluster11_1_4_ReplayLimitOnNonOwners: with a replay limit of 6
// and a filter of turn.started and turn.completed, a client of a
// non-owner node that does not follow the tree yet gets a gap of
// exactly 6 matching events replayed (counted in its projection) and a
// gap of 7 refused with replay_too_large; snapshot: true then works on
// the refused client.
func TestCluster11_1_4_ReplayLimitOnNonOwners(t *testing.T) {
	tri := startTrio(t, func(c *config.Config) { c.ReplayLimit = 6 })
	sid := tri.session()
	for i := range 4 {
		tri.nodes[i%3].Submit(sid, "/echo turn "+string(rune('a'+i)))
		tri.owner().WaitTurn(sid)
	}
	filter := protocol.Filter{EventTypes: []string{"turn.started", "turn.completed"}}
	var m []string
	for _, e := range tri.owner().Live.Events(sid) {
		if e.Type == event.TurnStarted || e.Type == event.TurnCompleted {
			m = append(m, e.ID)
		}
	}
	if len(m) != 8 {
		t.Fatalf("%d matching events", len(m))
	}
	eventually(t, "node 2's projection", func() bool { return lastStored(t, tri.nodes[2], sid) >= m[7] })
	msgs := len(messagesOf(t, tri.owner(), sid))
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		h := tri.nodes[2]
		c, ack, _ := subscribe(t, tr, h, sid, filter, ptr(m[1]), false)
		if ack.ReplayEventCount != 6 || ack.StreamingGap {
			t.Fatalf("ack %+v", ack)
		}
		got := streamtest.ReadEvents(t, c, specRead, 6)
		if !slices.Equal(streamtest.IDs(got), m[2:]) {
			t.Fatalf("replay %v, want %v", streamtest.IDs(got), m[2:])
		}
		c.Close()

		refused := tr.Connect(t, h.URL, sid, nil)
		if serr := subscribeRefused(t, refused, filter, ptr(m[0])); serr.Code != protocol.CodeReplayTooLarge {
			t.Fatalf("subscribe_error %+v", serr)
		}
		if _, snap := subscribeOn(t, refused, filter, nil, true); len(snap.Messages) != msgs {
			t.Fatalf("snapshot with %d messages, want %d", len(snap.Messages), msgs)
		}
	})
}

// lastStored is the newest event id node h's store holds for a session.
func lastStored(t *testing.T, h *servertest.Harness, sid string) string {
	t.Helper()
	id, err := h.Server.Store.LastEventID(t.Context(), sid)
	servertest.Must(t, err)
	return id
}

// TestCluster11_1_5_CursorExpiredOnNonOwners: on a node that does not
// own the tree, a cursor older than the retention gets cursor_expired
// and one just inside it replays exactly what the owner delivered
// after it; a malformed cursor gets invalid_cursor. Each refusal
// leaves the client usable.
func TestCluster11_1_5_CursorExpiredOnNonOwners(t *testing.T) {
	tri := startTrio(t)
	sid := tri.session()
	turn := tri.nodes[1].Submit(sid, "/echo remembered")
	tri.owner().WaitTurn(sid)
	end := firstOf(t, tri.owner(), sid, event.TurnCompleted, turn)
	eventually(t, "node 2's projection", func() bool { return lastStored(t, tri.nodes[2], sid) >= end })
	retention := tri.owner().Config.Retention
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		h := tri.nodes[2]
		c := tr.Connect(t, h.URL, sid, nil)
		old := streamtest.IDAt(t, time.Now().Add(-retention-time.Hour))
		if serr := subscribeRefused(t, c, "preset:chat", &old); serr.Code != protocol.CodeCursorExpired || !strings.Contains(serr.Message, "snapshot") {
			t.Fatalf("subscribe_error %+v", serr)
		}
		if serr := subscribeRefused(t, c, "preset:chat", ptr("evt_not-a-ulid")); serr.Code != protocol.CodeInvalidCursor {
			t.Fatalf("subscribe_error %+v", serr)
		}
		if _, snap := subscribeOn(t, c, "preset:chat", &old, true); len(snap.Messages) != 2 {
			t.Fatalf("snapshot with %d messages", len(snap.Messages))
		}
		c.Close()

		recent := streamtest.IDAt(t, time.Now().Add(-retention+time.Hour))
		c2, ack, _ := subscribe(t, tr, h, sid, "preset:chat", &recent, false)
		evs, _ := readUntil(t, c2, event.TurnCompleted, turn)
		if ack.ReplayEventCount != len(evs) {
			t.Fatalf("replay_event_count %d, %d events replayed", ack.ReplayEventCount, len(evs))
		}
		tri.sameAsOwner("the replay", sid, recent, evs, streamtest.PresetTypes(event.PresetChat))
	})
}

// TestCluster11_1_13_FilterValidationOnNonOwners: a node that does not
// own the tree refuses an unknown event type with invalid_filter naming
// it (on SSE with 400), and the client subscribes again.
func TestCluster11_1_13_FilterValidationOnNonOwners(t *testing.T) {
	tri := startTrio(t)
	sid := tri.session()
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		c := tr.Connect(t, tri.nodes[1].URL, sid, nil)
		c.Subscribe(protocol.Filter{EventTypes: []string{"text.delta", "made.up.thing"}}, nil, false)
		f := nextFrame(t, c)
		if f.Err == nil || f.Err.Code != protocol.CodeInvalidFilter || f.Err.Offending != "made.up.thing" {
			t.Fatalf("want invalid_filter naming made.up.thing, got %s", f.Raw)
		}
		if tr.Name == streamtest.SSE.Name && f.Status != http.StatusBadRequest {
			t.Fatalf("SSE refusal with %d", f.Status)
		}
		subscribeOn(t, c, "preset:chat", nil, false)
	})
}
