package hub_test

import (
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// TestGapResyncsClientsAndIsReportedOnResume: told that streaming
// events of a tree never reached this node (cluster mode: the owner
// published them, the log lost them), the hub closes the tree's live
// clients for resync (close reason resync), and a client that resumes
// from a cursor before the gap gets streaming_gap; one after it does
// not, and a catalog-only filter never does.
func TestGapResyncsClientsAndIsReportedOnResume(t *testing.T) {
	e := newEnv(t, openStore(t), hub.Config{RingSize: 100})
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull})
	e.mustEmit(event.LLMCallStarted, event.ActorAgent, "turn_1")
	before := e.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
	e.barrier()
	// A delta this node never got: its id sorts between before and
	// whatever the owner emitted next.
	e.h.Gap(e.sid, before.ID+"0")
	o, overflown := att.Client.Overflow()
	if !overflown || !o.Resync || o.Reason != protocol.ReasonResync {
		t.Fatalf("the client after a gap: overflow %+v (%v), want a resync", o, overflown)
	}
	after := e.mustEmit(event.TextDelta, event.ActorModel, "turn_1")
	e.barrier()

	since := before.ID
	if a := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: &since}); !a.Ack.StreamingGap {
		t.Fatal("a resume from before the gap has no streaming_gap")
	}
	since = after.ID
	if a := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: &since}); a.Ack.StreamingGap {
		t.Fatal("a resume from after the gap has streaming_gap")
	}
	since = before.ID
	chat := e.subscribe(protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{string(event.TurnCompleted)}}, Since: &since})
	if chat.Ack.StreamingGap {
		t.Fatal("a catalog-only filter has streaming_gap")
	}
}
