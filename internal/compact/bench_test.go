package compact

import (
	"fmt"
	"testing"

	"github.com/metis-agent/metis/internal/message"
)

// BenchmarkViewAndEstimate is what every model call of a long session
// pays before it is sent: the model's view of a 1,000-message
// conversation (250 turns of a tool round each, compacted once in the
// middle) and its estimate.
func BenchmarkViewAndEstimate(b *testing.B) {
	var c conv
	for i := range 250 {
		c.turn(1, 2000)
		if i == 125 {
			c.store(message.Compaction{Summary: "earlier work", CompactedThrough: fmt.Sprintf("msg_%04d", c.n-10),
				StubbedThrough: fmt.Sprintf("msg_%04d", c.n-2), Method: "summary"})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		v := View(c.ms)
		_ = Estimate(c.ms, v, 1000)
	}
}
