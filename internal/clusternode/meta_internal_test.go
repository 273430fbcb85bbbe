package clusternode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/metrics"
)

// fakeMeta is the emit and count of a metaForwarder under test: emit
// records each job and, while gate is open (not closed), blocks.
type fakeMeta struct {
	gate    chan struct{}
	entered chan string // the subscription name of each job emit starts

	mu     sync.Mutex
	jobs   map[string][]string // session -> subscription names, in emit order
	counts map[string]int
}

func newFakeMeta() *fakeMeta {
	return &fakeMeta{gate: make(chan struct{}), entered: make(chan string, 1024),
		jobs: map[string][]string{}, counts: map[string]int{}}
}

func (f *fakeMeta) emit(ctx context.Context, job metaJob) (string, error) {
	name := job.payload["subscription_name"].(string)
	f.entered <- name
	select {
	case <-f.gate:
	case <-ctx.Done():
		return metrics.MetaFailed, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs[job.sessionID] = append(f.jobs[job.sessionID], name)
	return metrics.MetaRouted, nil
}

func (f *fakeMeta) count(result string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[result]++
}

func (f *fakeMeta) snapshot() (map[string][]string, map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	jobs := map[string][]string{}
	for k, v := range f.jobs {
		jobs[k] = append([]string(nil), v...)
	}
	counts := map[string]int{}
	for k, v := range f.counts {
		counts[k] = v
	}
	return jobs, counts
}

// TestMetaForwarderIsBoundedAndKeepsASessionsOrder: forward never
// blocks: with a session's queue full behind a meta-event whose
// request hangs, the next one is dropped and counted; every meta-event
// queued is sent, a session's in the order forwarded, one at a time;
// a session holds its meta-events while any waits (so later ones
// follow them); close sends what was queued, and a forward after
// close is dropped.
func TestMetaForwarderIsBoundedAndKeepsASessionsOrder(t *testing.T) {
	fm := newFakeMeta()
	f := newMetaForwarder(slog.New(slog.DiscardHandler), fm.emit, fm.count)
	name := func(i int) map[string]any { return map[string]any{"subscription_name": fmt.Sprintf("stream-%d@n", i)} }

	f.forward("sess_a", event.BusSubscriberRegistered, name(0))
	if got := <-fm.entered; got != "stream-0@n" {
		t.Fatalf("first emit of %s", got)
	}
	// Its request hangs: the session's queue fills, then drops.
	for i := 1; i <= metaQueue; i++ {
		f.forward("sess_a", event.BusSubscriberRegistered, name(i))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.forward("sess_a", event.BusSubscriberUnregister, name(metaQueue+1))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("forward blocked on a full queue")
	}
	if _, counts := fm.snapshot(); counts[metrics.MetaDropped] != 1 {
		t.Fatalf("counts %v, want one dropped", counts)
	}
	// While they wait, the session's later meta-events must follow
	// them through the queue, even if this node may emit them itself.
	if !f.holds("sess_a") || f.holds("sess_other") {
		t.Fatalf("holds: sess_a %v, sess_other %v; want true, false", f.holds("sess_a"), f.holds("sess_other"))
	}

	close(fm.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.close(ctx); err != nil {
		t.Fatal(err)
	}
	if f.holds("sess_a") {
		t.Fatal("the session still holds meta-events once they were all sent")
	}
	f.forward("sess_a", event.BusSubscriberUnregister, name(0))
	if f.holds("sess_a") {
		t.Fatal("a meta-event dropped after close is held")
	}
	jobs, counts := fm.snapshot()
	if len(jobs["sess_a"]) != metaQueue+1 {
		t.Fatalf("sent %d meta-events of the session, want %d", len(jobs["sess_a"]), metaQueue+1)
	}
	for i, got := range jobs["sess_a"] {
		if want := name(i)["subscription_name"]; got != want {
			t.Fatalf("meta-event %d sent was %s, want %s", i, got, want)
		}
	}
	if counts[metrics.MetaRouted] != metaQueue+1 || counts[metrics.MetaDropped] != 2 {
		t.Fatalf("counts %v, want %d routed and 2 dropped", counts, metaQueue+1)
	}
}

// TestMetaForwarderCloseIsBounded: close gives up on requests still
// hanging when its context ends: they fail (counted), the queued rest
// fails at once, and no goroutine is left (goleak, TestMain).
func TestMetaForwarderCloseIsBounded(t *testing.T) {
	fm := newFakeMeta()
	f := newMetaForwarder(slog.New(slog.DiscardHandler), fm.emit, fm.count)
	for i := range 3 {
		f.forward("sess_b", event.BusHandlerWarning, map[string]any{"subscription_name": fmt.Sprintf("stream-%d@n", i)})
	}
	<-fm.entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close: %v, want the deadline", err)
	}
	if _, counts := fm.snapshot(); counts[metrics.MetaFailed] != 3 {
		t.Fatalf("counts %v, want 3 failed", counts)
	}
}
