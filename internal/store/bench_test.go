package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/metis-agent/metis/internal/event"
)

// benchEvents prebuilds n sealed ~300-byte events spread over sessions.
func benchEvents(b *testing.B, n, sessions int) []*event.Event {
	makers := make([]*eventMaker, sessions)
	for i := range makers {
		makers[i] = newMaker(b, fmt.Sprintf("sess_%02d", i))
	}
	evs := make([]*event.Event, n)
	for i := range evs {
		m := makers[i%sessions]
		evs[i] = m.next(types[m.n%len(types)])
	}
	if n > 0 {
		b.Logf("event size %d bytes", len(evs[0].JSON()))
	}
	return evs
}

// BenchmarkAppendGroupCommit appends events from many concurrent
// submitters, as the bus does with many busy sessions: each of 64
// submitters keeps up to 16 appends in flight (Submit, then wait for
// done when its window is full), and the writer groups whatever is
// queued into each transaction.
func BenchmarkAppendGroupCommit(b *testing.B) {
	const (
		submitters = 64
		window     = 16
	)
	s := openTest(b, Options{})
	evs := benchEvents(b, b.N, submitters)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range submitters {
		wg.Go(func() {
			sem := make(chan struct{}, window)
			for {
				i := next.Add(1) - 1
				if i >= int64(len(evs)) {
					break
				}
				sem <- struct{}{}
				s.Submit([]Op{AppendEvent{Event: evs[i]}}, func(err error) {
					if err != nil {
						b.Error(err)
					}
					<-sem
				})
			}
			for range window { // wait for the in-flight ones
				sem <- struct{}{}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	st := s.Stats()
	if st.Commits > 0 {
		b.ReportMetric(float64(st.Ops)/float64(st.Commits), "ops/tx")
	}
}

// BenchmarkAppendWaiting appends from many submitters that each wait for
// every commit (Apply), the bus's worst case: one event in flight per
// session.
func BenchmarkAppendWaiting(b *testing.B) {
	s := openTest(b, Options{})
	evs := benchEvents(b, b.N, 64)
	var next atomic.Int64
	ctx := context.Background()
	b.SetParallelism(32) // 32 × GOMAXPROCS submitters
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			if err := s.Apply(ctx, AppendEvent{Event: evs[i]}); err != nil {
				b.Error(err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	st := s.Stats()
	if st.Commits > 0 {
		b.ReportMetric(float64(st.Ops)/float64(st.Commits), "ops/tx")
	}
}

// BenchmarkAppendSerial commits one event per transaction, waiting for
// each: the cost group commit amortises.
func BenchmarkAppendSerial(b *testing.B) {
	s := openTest(b, Options{})
	evs := benchEvents(b, b.N, 1)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Apply(ctx, AppendEvent{Event: evs[i]}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkCountEvents counts one session's events among 40,000, with
// and without a type filter (which reads each row's type).
func BenchmarkCountEvents(b *testing.B) {
	s := openTest(b, Options{})
	const sessions = 4
	evs := benchEvents(b, 40000, sessions)
	ops := make([]Op, len(evs))
	for i, ev := range evs {
		ops[i] = AppendEvent{Event: ev}
	}
	if err := s.Apply(context.Background(), ops...); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		q    EventQuery
	}{
		{"all", EventQuery{SessionIDs: []string{evs[0].SessionID}}},
		{"types", EventQuery{SessionIDs: []string{evs[0].SessionID}, Types: []event.Type{event.TurnStarted, event.TurnCompleted}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				n, err := s.CountEvents(context.Background(), c.q)
				if err != nil || n == 0 {
					b.Fatal(n, err)
				}
			}
		})
	}
}
