//go:build unix

package store

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

// replaySizes are payload sizes in bytes, cycled through, shaped like
// a builtin:demo history (short bus and call events, a few kilobytes
// of tool output now and then).
var replaySizes = []int{120, 180, 250, 300, 420, 600, 900, 3200}

// allCatalog is every catalog type: what a preset:full replay asks of
// the store.
func allCatalog() []event.Type {
	var out []event.Type
	for _, i := range event.All() {
		if i.Family == event.Catalog {
			out = append(out, i.Type)
		}
	}
	return out
}

// BenchmarkReplayRead is the store's half of a replay: count, then read
// in id order, the newest 10,000 events of a session whose events
// interleave with another session's, right after a write (which, in WAL
// mode, empties every reader's page cache, as on a live server).
// ns/event is per replayed event, count and read together.
func BenchmarkReplayRead(b *testing.B) {
	const n = 10000
	s := openTest(b, Options{})
	a, other := newMaker(b, "sess_a"), newMaker(b, "sess_b")
	typs := allCatalog()
	var evs []*event.Event
	for i := range n + 100 {
		size := replaySizes[i%len(replaySizes)]
		evs = append(evs, a.sized(typs[i%len(typs)], size))
		if i%2 == 0 {
			evs = append(evs, other.sized(event.TurnStarted, 200))
		}
	}
	appendAll(b, s, evs)
	ctx := context.Background()
	var ids []string
	if err := s.ScanEvents(ctx, EventQuery{SessionIDs: []string{"sess_a"}}, func(r EventRow) error {
		ids = append(ids, r.ID)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	q := EventQuery{SessionIDs: []string{"sess_a"}, AfterID: ids[len(ids)-n-1], Types: typs}
	var bytes int64
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		appendAll(b, s, []*event.Event{other.sized(event.TurnStarted, 200)})
		b.StartTimer()
		cpu0 := processCPU()
		c, err := s.CountEvents(ctx, q)
		if err != nil || c != n {
			b.Fatalf("count %d, %v", c, err)
		}
		got := 0
		if err := s.ScanEvents(ctx, q, func(r EventRow) error {
			got++
			bytes += int64(len(r.Body))
			return nil
		}); err != nil || got != n {
			b.Fatalf("read %d, %v", got, err)
		}
		cpu += processCPU() - cpu0
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/n, "cpu_ns/event")
	b.ReportMetric(float64(bytes)/float64(b.N)/n, "B/event")
}

// BenchmarkReplayReadBatch is BenchmarkReplayRead as the hub reads a
// replay: the count without a type filter (what preset:full counts by),
// then ScanEventBatch, 512 events a query.
func BenchmarkReplayReadBatch(b *testing.B) {
	const n, batch = 10000, 512
	s := openTest(b, Options{})
	a, other := newMaker(b, "sess_a"), newMaker(b, "sess_b")
	typs := allCatalog()
	var evs []*event.Event
	for i := range n + 100 {
		evs = append(evs, a.sized(typs[i%len(typs)], replaySizes[i%len(replaySizes)]))
		if i%2 == 0 {
			evs = append(evs, other.sized(event.TurnStarted, 200))
		}
	}
	appendAll(b, s, evs)
	ctx := context.Background()
	from := evs[len(evs)-1-n-n/2].ID // about n of sess_a's events follow it
	var want int
	for _, ev := range evs {
		if ev.SessionID == "sess_a" && ev.ID > from {
			want++
		}
	}
	var bytes int64
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		appendAll(b, s, []*event.Event{other.sized(event.TurnStarted, 200)})
		b.StartTimer()
		cpu0 := processCPU()
		q := EventQuery{SessionIDs: []string{"sess_a"}, AfterID: from}
		c, err := s.CountEvents(ctx, q)
		if err != nil || c != want {
			b.Fatalf("count %d, %v, want %d", c, err, want)
		}
		q.Types = typs
		got := 0
		for {
			k, err := s.ScanEventBatch(ctx, q, batch, func(r *EventRow) {
				got++
				bytes += int64(len(r.Body))
				q.AfterID = r.ID
			})
			if err != nil {
				b.Fatal(err)
			}
			if k < batch {
				break
			}
		}
		if got != want {
			b.Fatalf("read %d, want %d", got, want)
		}
		cpu += processCPU() - cpu0
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(want), "ns/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(want), "cpu_ns/event")
	b.ReportMetric(float64(bytes)/float64(b.N)/float64(want), "B/event")
}

// processCPU is the CPU time of this process so far, every thread.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sized is next with a payload of about size bytes.
func (m *eventMaker) sized(typ event.Type, size int) *event.Event {
	id, ts := m.seq.Next()
	m.n++
	p, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", size)})
	ev := &event.Event{ID: id, Type: typ, SessionID: m.session, TurnID: "turn_1", TS: ts,
		Actor: event.ActorAgent, Payload: p}
	if err := ev.Seal(); err != nil {
		m.tb.Fatal(err)
	}
	return ev
}
