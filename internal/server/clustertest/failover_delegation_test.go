package clustertest_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestOwnerKilledMidDelegationFailsTheDelegation: node a, in a process
// of its own, runs a planner's turn whose worker is streaming when a is
// killed (SIGKILL). The node that takes the tree over ends it as crash
// recovery does: the worker's turn is cancelled (owner_lost), then the
// planner records delegate.failed for that worker (failure mode
// interrupted), then the planner's turn is cancelled; node b's client,
// which includes workers, sees that sequence live. A snapshot taken
// afterwards shows the worker failed, not running.
func TestOwnerKilledMidDelegationFailsTheDelegation(t *testing.T) {
	url := startNATS(t)
	a := startProcNode(t, url, "node-a", failoverTTL, 5*time.Millisecond)
	b := failoverNode(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onB := streamtest.Attach(t, b.URL, sid)
	onB.Subscribe(streamtest.PresetFilter(event.PresetFull)(true), nil, false)
	if f := onB.Read(wait); f.Ack == nil {
		t.Fatalf("want subscribe_ack, got %s", f.Raw)
	}

	turn := a.Submit(sid, streamtest.DelegateCmd("/long 5000"))
	var worker string
	deltas := 0
	onB.Events(wait, func(e *protocol.EventEnvelope) bool {
		if e.Type == string(event.DelegateStarted) {
			var p protocol.DelegateStartedPayload
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			worker = p.WorkerSessionID
		}
		if worker != "" && e.SessionID == worker && e.Type == string(event.TextDelta) {
			deltas++
		}
		return deltas == 5
	})
	a.Kill()

	got := onB.Events(wait, func(e *protocol.EventEnvelope) bool {
		return e.SessionID == sid && streamtest.UntilType(event.TurnCancelled, turn)(e)
	})
	var ends []string // the recovery's catalog events, in order
	var failed protocol.DelegateFailedPayload
	for _, e := range got {
		switch {
		case e.Type == string(event.TurnCancelled):
			ownerLost(t, e, *e.TurnID)
			ends = append(ends, e.SessionID+" "+e.Type)
		case e.Type == string(event.DelegateFailed):
			if err := json.Unmarshal(e.Payload, &failed); err != nil {
				t.Fatal(err)
			}
			ends = append(ends, e.SessionID+" "+e.Type)
		}
	}
	want := []string{worker + " turn.cancelled", sid + " delegate.failed", sid + " turn.cancelled"}
	if len(ends) != len(want) || ends[0] != want[0] || ends[1] != want[1] || ends[2] != want[2] {
		t.Fatalf("the takeover ended the tree with %v, want %v", ends, want)
	}
	if failed.WorkerSessionID != worker || failed.FailureMode != protocol.DelegateFailureInterrupted {
		t.Fatalf("delegate.failed %+v, want worker %s, failure mode interrupted", failed, worker)
	}

	snap := streamtest.Attach(t, b.URL, sid)
	snap.Subscribe(streamtest.PresetFilter(event.PresetFull)(false), nil, true)
	for {
		f := snap.Read(wait)
		if f.Snap == nil {
			continue
		}
		if len(f.Snap.Workers) != 1 || f.Snap.Workers[0].Status != "failed" ||
			f.Snap.Workers[0].FailureMode != protocol.DelegateFailureInterrupted {
			t.Fatalf("snapshot workers %+v, want the worker failed (interrupted)", f.Snap.Workers)
		}
		break
	}
}
