package hub

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/protocol"
)

// windowBenchFrame is the size of a replayed frame in BenchmarkReplay10k's
// history (about 520 bytes on average).
const windowBenchFrame = 520

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// windowItems makes n catalog items of sid, as Publish frames them.
func windowItems(seq *event.Sequencer, sid string, n int) []*Item {
	out := make([]*Item, n)
	for i := range out {
		id, ts := seq.Next()
		body := fmt.Sprintf(`{"id":%q,"session_id":%q,"type":"tool.called","pad":%q}`, id, sid,
			strings.Repeat("p", windowBenchFrame-120))
		out[i] = &Item{ID: id, SessionID: sid, Type: event.ToolCalled, Actor: event.ActorTool, TS: ts,
			Frame: protocol.EventFrame([]byte(body))}
	}
	return out
}

// BenchmarkWindowMemory measures what the replay windows cost in heap:
//
//   - idle: 1,000 idle sessions, each with a window of 20 recent catalog
//     events (a short conversation): heap per session, against what the
//     cap counts for it (frames, 160 bytes per event, 256 per session);
//   - at the cap: sessions of 200 events each appended until the
//     windows hold their 32 MiB default cap (and the least recently used
//     are let go): heap in use by the windows against the cap.
//
// The heap figures are everything the windows keep alive: the items and
// their frames (which Publish builds for the live clients anyway; the
// window is what keeps them after the clients have written them), the
// windows and their index.
//
//	go test -run '^$' -bench WindowMemory -benchtime 1x ./internal/hub/
func BenchmarkWindowMemory(b *testing.B) {
	for b.Loop() {
		seq, err := event.NewSequencer("", nil)
		if err != nil {
			b.Fatal(err)
		}
		// Idle sessions.
		const sessions, per = 1000, 20
		base := heapInUse()
		ws := newWindowSet(10000, 32<<20, metrics.New().Stream)
		for s := range sessions {
			for _, it := range windowItems(seq, fmt.Sprintf("sess_%04d", s), per) {
				ws.add(it)
			}
		}
		idle := heapInUse() - base
		b.ReportMetric(float64(idle)/sessions, "idle_heap_B/session")
		b.ReportMetric(float64(ws.bytes)/sessions, "idle_counted_B/session")
		runtime.KeepAlive(ws)

		// At the cap.
		base = heapInUse()
		ws = newWindowSet(10000, 32<<20, metrics.New().Stream)
		for s := 0; ws.evictions < 10; s++ {
			for _, it := range windowItems(seq, fmt.Sprintf("sess_big_%04d", s), 200) {
				ws.add(it)
			}
		}
		full := heapInUse() - base
		b.ReportMetric(float64(full)/(1<<20), "cap_heap_MiB")
		b.ReportMetric(float64(ws.bytes)/(1<<20), "cap_counted_MiB")
		b.ReportMetric(float64(full)/float64(ws.bytes), "heap/counted")
		runtime.KeepAlive(ws)
	}
}
