package clusterbench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
)

// The deltas the benchmarks emit carry a sequence number in their text
// (benchtest.DeltaText), which the clients (benchtest.Reader) parse to
// match each frame with its emit time.

const deltaMsgID = "msg_01JCLUSTERBENCHCLUSTERBENC"

// emitDelta is the model adapter's emit of one text delta.
func emitDelta(em *bus.Emitter, text string) error {
	_, err := em.Emit(bus.Spec{Type: event.TextDelta, TurnID: "turn_bench", Actor: event.ActorModel,
		Payload: benchtest.DeltaPayload{MessageID: deltaMsgID, Text: text}})
	return err
}

// settle emits one delta (one the clients do not count) and waits
// until it is delivered on the emitting node: every event emitted
// before it (the clients' bus.subscriber_registered, committed through
// the log in cluster mode) is committed and delivered by then.
func settle(tb testing.TB, em *bus.Emitter) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := em.EmitWait(ctx, bus.Spec{Type: event.TextDelta, TurnID: "turn_bench", Actor: event.ActorModel,
		Payload: benchtest.DeltaPayload{MessageID: deltaMsgID, Text: "settled"}}); err != nil {
		tb.Fatal(err)
	}
}

// dial attaches to a session on node n (GET /sessions/{id}, then the
// WebSocket), subscribes with the event types and since (if not empty),
// and returns the connection and the raw subscribe_ack.
func dial(ctx context.Context, n *node, sid string, types []string, since string) (*websocket.Conn, []byte, error) {
	ws, ack, err := benchtest.Dial(ctx, n.hc, n.url, sid, types, since)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", n.name, err)
	}
	return ws, ack, nil
}
