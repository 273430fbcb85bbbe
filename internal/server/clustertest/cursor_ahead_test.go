package clustertest_test

import (
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestCursorAheadOfANonOwnerWaitsForItsFeed: node b follows a tree that
// node a owns (a client of b is attached) while b's projection is
// stalled, so b's feed has not relayed a's latest turn. A client that
// watched that turn end on a resumes on b with the turn.completed id as
// its cursor, an instant later: b waits until its feed delivered
// through the cursor and acknowledges it with nothing to replay, where
// it used to refuse it (invalid_cursor: "since is after the last
// event"). The resumed client then follows the next turn live, as the
// client that stayed on b does. A made-up cursor is still refused.
func TestCursorAheadOfANonOwnerWaitsForItsFeed(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA, stayed := attach(t, a, sid), attach(t, b, sid)

	release := stall(t, b)
	turn := a.Submit(sid, "/echo ahead of node b")
	got := onA.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	cursor := got[len(got)-1].ID
	em, err := b.Server.Bus.Emitter(t.Context(), sid)
	if err != nil {
		t.Fatal(err)
	}
	if em.LastDelivered() >= cursor {
		t.Fatalf("node b delivered %s while stalled; the test needs it behind", cursor)
	}

	re := streamtest.Attach(t, b.URL, sid)
	var first streamtest.Frame
	whileStalled(t, release, func() {
		re.Subscribe("preset:full", &cursor, false)
		first = re.Read(wait)
	})
	if first.Ack == nil {
		t.Fatalf("a cursor from node a resumed on node b: %s, want subscribe_ack", first.Raw)
	}
	if first.Ack.ReplayEventCount != 0 || first.Ack.StreamingGap || first.Ack.SeamEventID < cursor {
		t.Fatalf("ack %+v for cursor %s: want nothing to replay, no gap, a seam at or after the cursor", first.Ack, cursor)
	}

	next := a.Submit(sid, "/echo after the resume")
	resumed := re.Events(wait, streamtest.UntilType(event.TurnCompleted, next))
	want := stayed.Events(wait, streamtest.UntilType(event.TurnCompleted, next))
	want = after(want, cursor)
	if len(resumed) != len(want) {
		t.Fatalf("the resumed client got %d events, the client that stayed %d after the cursor", len(resumed), len(want))
	}
	for i := range want {
		if resumed[i].ID != want[i].ID {
			t.Fatalf("event %d: resumed %s %s, stayed %s %s", i, resumed[i].Type, resumed[i].ID, want[i].Type, want[i].ID)
		}
	}

	// A cursor no node ever handed out (an hour ahead) waits its bound,
	// then is refused as a single node refuses it.
	future := streamtest.IDAt(t, time.Now().Add(time.Hour))
	made := streamtest.Attach(t, b.URL, sid)
	made.Subscribe("preset:full", &future, false)
	if f := made.Read(wait); f.Err == nil || f.Err.Code != protocol.CodeInvalidCursor {
		t.Fatalf("a made-up cursor on node b: %s, want subscribe_error invalid_cursor", f.Raw)
	}
}

// after returns the events of evs whose id sorts after id.
func after(evs []*protocol.EventEnvelope, id string) []*protocol.EventEnvelope {
	var out []*protocol.EventEnvelope
	for _, e := range evs {
		if e.ID > id {
			out = append(out, e)
		}
	}
	return out
}
