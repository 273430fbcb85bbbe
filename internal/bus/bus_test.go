package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tb is the part of testing.TB that rapid.T also has.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func closeAll(t tb, b *Bus, st *fakeStore) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st.close()
}

func waitFor(t tb, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEmitOrderMixedFamilies: for any interleaving of catalog and
// streaming emits from concurrent goroutines on several sessions, the
// live sink receives every event exactly once, per session in strictly
// increasing id order, and never a catalog event before its commit.
func TestEmitOrderMixedFamilies(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		st := newFakeStore()
		rec := newRecorder(st)
		b := New(st, Options{Live: rec})
		sessions := rapid.IntRange(1, 3).Draw(rt, "sessions")
		workers := rapid.IntRange(1, 4).Draw(rt, "workers")
		plan := rapid.SliceOfN(rapid.Bool(), 1, 120).Draw(rt, "catalog?")
		var wg sync.WaitGroup
		emitted := make([]atomic.Int64, sessions)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i, cat := range plan {
					sid := (w + i) % sessions
					em, err := b.Emitter(context.Background(), fmt.Sprintf("sess_%d", sid))
					if err != nil {
						panic(err)
					}
					typ := event.TextDelta
					if cat {
						typ = event.ToolCalled
					}
					if _, err := em.Emit(Spec{Type: typ, Actor: "test", Payload: map[string]int{"i": i}}); err != nil {
						panic(err)
					}
					emitted[sid].Add(1)
				}
			}()
		}
		wg.Wait()
		for sid := range sessions {
			name := fmt.Sprintf("sess_%d", sid)
			waitFor(rt, "delivery", func() bool { return int64(len(rec.events(name))) == emitted[sid].Load() })
		}
		closeAll(rt, b, st)
		if len(rec.errors) > 0 {
			rt.Fatal(rec.errors)
		}
	})
}

// TestSlowSubscriberIsolation: a subscriber that blocks does not block
// the emitter or a fast subscriber; it yields bus.handler_warning, and
// once unblocked it catches up from the store, seeing every event
// exactly once and in order.
func TestSlowSubscriberIsolation(t *testing.T) {
	st := newFakeStore()
	rec := newRecorder(st)
	b := New(st, Options{Live: rec, SubscriberQueue: 16})
	release := make(chan struct{})
	var slowMu, fastMu sync.Mutex
	var slowSeen, fastSeen []int64
	b.Subscribe("slow", func(ctx context.Context, ev *event.Event) error {
		<-release
		slowMu.Lock()
		slowSeen = append(slowSeen, ev.Seq)
		slowMu.Unlock()
		return nil
	}, SubscribeOptions{Types: []event.Type{event.ToolCalled}})
	b.Subscribe("fast", func(ctx context.Context, ev *event.Event) error {
		fastMu.Lock()
		fastSeen = append(fastSeen, ev.Seq)
		fastMu.Unlock()
		return nil
	}, SubscribeOptions{Types: []event.Type{event.ToolCalled}, Queue: 4096})

	em, _ := b.Emitter(context.Background(), "sess_a")
	const n = 2000
	start := time.Now()
	for i := range n {
		if _, err := em.Emit(Spec{Type: event.ToolCalled, Actor: "test", Payload: map[string]int{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("emitting %d events took %v with a blocked subscriber", n, d)
	}
	waitFor(t, "fast subscriber", func() bool { fastMu.Lock(); defer fastMu.Unlock(); return len(fastSeen) == n })
	waitFor(t, "warning", func() bool {
		for _, ev := range rec.events("sess_a") {
			if ev.Type == event.BusHandlerWarning {
				var p map[string]any
				ev.DecodePayload(&p)
				if p["subscription_name"] == "slow" {
					return true
				}
			}
		}
		return false
	})
	close(release)
	waitFor(t, "slow catch-up", func() bool { slowMu.Lock(); defer slowMu.Unlock(); return len(slowSeen) == n })
	closeAll(t, b, st)
	for _, seen := range [][]int64{slowSeen, fastSeen} {
		for i := 1; i < len(seen); i++ {
			if seen[i] <= seen[i-1] {
				t.Fatalf("subscriber saw seq %d after %d", seen[i], seen[i-1])
			}
		}
	}
}

// TestFailingSubscriber: errors and panics become warnings; the
// subscriber keeps receiving.
func TestFailingSubscriber(t *testing.T) {
	st := newFakeStore()
	rec := newRecorder(st)
	b := New(st, Options{Live: rec})
	var calls atomic.Int64
	b.Subscribe("flaky", func(ctx context.Context, ev *event.Event) error {
		switch calls.Add(1) {
		case 1:
			return errors.New("boom")
		case 2:
			panic("kaboom")
		}
		return nil
	}, SubscribeOptions{Types: []event.Type{event.TurnStarted}})
	em, _ := b.Emitter(context.Background(), "s")
	for range 3 {
		em.Emit(Spec{Type: event.TurnStarted, Actor: "test"})
	}
	waitFor(t, "3 calls", func() bool { return calls.Load() == 3 })
	waitFor(t, "2 warnings", func() bool {
		n := 0
		for _, ev := range rec.events("s") {
			if ev.Type == event.BusHandlerWarning {
				n++
			}
		}
		return n == 2
	})
	closeAll(t, b, st)
}

// TestCommitFailureNotDelivered: an event whose commit fails never
// reaches anyone, and later events still flow.
func TestCommitFailureNotDelivered(t *testing.T) {
	st := newFakeStore()
	st.fail = func(ops []store.Op) error {
		for _, op := range ops {
			if a, ok := op.(store.AppendEvent); ok && string(a.Event.Payload) == `{"bad":true}` {
				return errors.New("disk full")
			}
		}
		return nil
	}
	rec := newRecorder(st)
	b := New(st, Options{Live: rec})
	em, _ := b.Emitter(context.Background(), "s")
	em.Emit(Spec{Type: event.TurnStarted, Actor: "t"})
	if _, err := em.EmitWait(context.Background(), Spec{Type: event.ToolCalled, Actor: "t", Payload: map[string]bool{"bad": true}}); err == nil {
		t.Fatal("EmitWait succeeded for a failed commit")
	}
	em.Emit(Spec{Type: event.TextDelta, Actor: "t"})
	if _, err := em.EmitWait(context.Background(), Spec{Type: event.TurnCompleted, Actor: "t"}); err != nil {
		t.Fatal(err)
	}
	got := rec.events("s")
	var types []event.Type
	for _, e := range got {
		types = append(types, e.Type)
	}
	want := []event.Type{event.TurnStarted, event.TextDelta, event.TurnCompleted}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("delivered %v, want %v", types, want)
	}
	closeAll(t, b, st)
}

func TestEmitRejectsBadSpecs(t *testing.T) {
	st := newFakeStore()
	b := New(st, Options{})
	em, _ := b.Emitter(context.Background(), "s")
	if _, err := em.Emit(Spec{Type: "made.up"}); err == nil {
		t.Error("unknown type accepted")
	}
	if _, err := em.Emit(Spec{Type: event.TextDelta, Ops: []store.Op{store.AddUsage{}}}); err == nil {
		t.Error("streaming event with ops accepted")
	}
	closeAll(t, b, st)
	if _, err := em.Emit(Spec{Type: event.TurnStarted}); !errors.Is(err, ErrClosed) {
		t.Errorf("emit after close: %v", err)
	}
}
