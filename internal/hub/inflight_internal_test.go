package hub

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

// BenchmarkInflightMessage measures folding the held events of a call
// into the message a snapshot carries, by how many text deltas it holds
// (CPU only: no store, no subscribe).
func BenchmarkInflightMessage(b *testing.B) {
	for _, n := range []int{100, 4000} {
		b.Run(fmt.Sprintf("deltas=%d", n), func(b *testing.B) {
			item := func(i int, typ event.Type, p map[string]any) *Item {
				raw, _ := json.Marshal(p)
				ev := &event.Event{ID: fmt.Sprintf("evt_%026d", i), Type: typ, SessionID: "sess_1", TurnID: "turn_1",
					TS: time.Now(), Actor: event.ActorModel, Payload: raw}
				if err := ev.Seal(); err != nil {
					b.Fatal(err)
				}
				return newItem(ev)
			}
			f := &inflight{sessionID: "sess_1", call: openCall{startedID: fmt.Sprintf("evt_%026d", 0), messageID: "msg_1", turnID: "turn_1"}}
			f.items = append(f.items, item(1, event.MessageStart, map[string]any{"message_id": "msg_1", "role": "assistant"}))
			for i := range n {
				f.items = append(f.items, item(2+i, event.TextDelta, map[string]any{"message_id": "msg_1", "content_block_index": 0, "text": fmt.Sprintf("word%d ", i)}))
			}
			for b.Loop() {
				if m := f.message(); m == nil || len(m.Content) != 1 {
					b.Fatal("no message")
				}
			}
		})
	}
}
