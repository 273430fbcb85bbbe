package clusterbench_test

import (
	"context"
	"testing"
	"time"

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
			var rs []*reader
			for i, n := range s.nodes {
				ws, _, err := dial(context.Background(), n, sid, []string{string(event.TextDelta)}, "")
				if err != nil {
					t.Fatal(err)
				}
				rs = append(rs, newReader(ws, i, time.Now(), 50))
			}
			settle(t, em)
			texts := deltaTexts(50)
			for _, text := range texts {
				if err := emitDelta(em, text); err != nil {
					t.Fatal(err)
				}
			}
			if err := waitGot(rs, int64(len(texts)), time.Minute); err != nil {
				t.Fatal(err)
			}
			closeReaders(rs)
			for _, r := range rs {
				if len(r.samples) != len(texts) {
					t.Fatalf("node %d's client got %d deltas, want %d", r.node, len(r.samples), len(texts))
				}
				for i, smp := range r.samples {
					if int(smp.seq) != i {
						t.Fatalf("node %d's client got delta %d at position %d", r.node, smp.seq, i)
					}
				}
			}
		})
	}
}
