package clusterbench_test

import (
	"context"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/benchtest"
	"github.com/metis-agent/metis/internal/event"
)

// TestHarnessDeliversEveryDeltaToEveryNode keeps the benchmarks' harness
// honest in an ordinary test run: on single-node metis and on two nodes
// on one NATS server, a client of every node gets every delta the
// owner's emitter sent, in order, and the client's parse of a delta's
// sequence number matches what was sent.
func TestHarnessDeliversEveryDeltaToEveryNode(t *testing.T) {
	for _, name := range []string{sysSingle, sysR1} {
		t.Run(name, func(t *testing.T) {
			s := startSystem(t, name, 2, nil)
			sid, em := s.session(t, "")
			var rs []*benchtest.Reader
			for _, n := range s.nodes {
				ws, _, err := dial(context.Background(), n, sid, []string{string(event.TextDelta)}, "")
				if err != nil {
					t.Fatal(err)
				}
				rs = append(rs, benchtest.NewReader(ws, time.Now(), 50, true))
			}
			settle(t, em)
			texts := benchtest.DeltaTexts(50)
			for _, text := range texts {
				if err := emitDelta(em, text); err != nil {
					t.Fatal(err)
				}
			}
			if err := benchtest.WaitGot(rs, int64(len(texts)), time.Minute); err != nil {
				t.Fatal(err)
			}
			benchtest.CloseAll(rs)
			for node, r := range rs {
				if len(r.Samples()) != len(texts) {
					t.Fatalf("node %d's client got %d deltas, want %d", node, len(r.Samples()), len(texts))
				}
				for i, smp := range r.Samples() {
					if int(smp.Seq) != i {
						t.Fatalf("node %d's client got delta %d at position %d", node, smp.Seq, i)
					}
				}
			}
		})
	}
}
