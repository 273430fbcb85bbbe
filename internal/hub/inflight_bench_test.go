package hub_test

import (
	"fmt"
	"testing"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// BenchmarkSnapshotMidStream measures a snapshot subscribe (and its
// detach) of a session whose answer is streaming, by how many deltas of
// it the ring holds: the message in flight is folded from them on the
// subscribing goroutine. 0 is a session with no call in flight.
func BenchmarkSnapshotMidStream(b *testing.B) {
	for _, n := range []int{0, 100, 4000} {
		b.Run(fmt.Sprintf("deltas=%d", n), func(b *testing.B) {
			st := openStore(b)
			e := newEnv(b, st, hub.Config{SnapshotMessages: 50, RingSize: 4096})
			emit := func(typ event.Type, p map[string]any) {
				if _, err := e.em.Emit(bus.Spec{Type: typ, Actor: event.ActorModel, TurnID: "turn_1", Payload: p}); err != nil {
					b.Fatal(err)
				}
			}
			emit(event.TurnStarted, map[string]any{})
			if n > 0 {
				emit(event.LLMCallStarted, map[string]any{"message_id": "msg_1", "model": "m"})
				emit(event.MessageStart, map[string]any{"message_id": "msg_1", "role": "assistant", "model": "m"})
				for i := range n {
					emit(event.TextDelta, map[string]any{"message_id": "msg_1", "content_block_index": 0, "text": fmt.Sprintf("word%d ", i)})
				}
			}
			e.barrier()
			sub := protocol.Subscribe{Preset: event.PresetChat, Snapshot: true}
			for b.Loop() {
				att, serr := e.h.Subscribe(e.ctx, e.sid, &sub)
				if serr != nil {
					b.Fatal(serr.Message)
				}
				e.h.Unsubscribe(att.Client)
			}
		})
	}
}
