package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

// blockOp holds the writer inside its transaction until released, so a
// test can queue submissions that must then share one batch.
type blockOp struct{ entered, release chan struct{} }

func (blockOp) isOp() {}

func (b blockOp) apply(*txn) error {
	close(b.entered)
	<-b.release
	return nil
}

// blockWriter parks the writer and returns the function releasing it.
func blockWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	b := blockOp{entered: make(chan struct{}), release: make(chan struct{})}
	s.Submit([]Op{b}, nil)
	<-b.entered
	return sync.OnceFunc(func() { close(b.release) })
}

func TestGroupCommitConcurrent(t *testing.T) {
	const (
		goroutines = 8
		perG       = 1250 // 10k events in all
	)
	ctx := context.Background()
	s := openTest(t, Options{})
	before := s.Stats()

	type result struct {
		mu    sync.Mutex
		order []int // done order of this goroutine's submissions
		calls []int // done calls per submission
		errs  []error
	}
	res := make([]*result, goroutines)
	evs := make([][]*event.Event, goroutines)
	for g := range goroutines {
		res[g] = &result{calls: make([]int, perG), errs: make([]error, perG)}
		evs[g] = newMaker(t, "sess_"+string(rune('a'+g))).many(perG)
	}
	var submitted, done sync.WaitGroup
	done.Add(goroutines * perG)
	for g := range goroutines {
		submitted.Go(func() {
			r := res[g]
			for i, ev := range evs[g] {
				s.Submit([]Op{AppendEvent{Event: ev}}, func(err error) {
					r.mu.Lock()
					r.order = append(r.order, i)
					r.calls[i]++
					r.errs[i] = err
					r.mu.Unlock()
					done.Done()
				})
			}
		})
	}
	submitted.Wait()
	done.Wait()

	for g, r := range res {
		for i := range perG {
			if r.calls[i] != 1 || r.errs[i] != nil {
				t.Fatalf("goroutine %d submission %d: done called %d times, err %v", g, i, r.calls[i], r.errs[i])
			}
			if evs[g][i].Seq == 0 {
				t.Fatalf("goroutine %d event %d: Seq not set", g, i)
			}
		}
		if !slices.IsSorted(r.order) {
			t.Fatalf("goroutine %d: done calls out of submission order", g)
		}
		// Seqs follow submission order per submitter.
		for i := 1; i < perG; i++ {
			if evs[g][i].Seq <= evs[g][i-1].Seq {
				t.Fatalf("goroutine %d: seq %d after %d", g, evs[g][i].Seq, evs[g][i-1].Seq)
			}
		}
		sid := evs[g][0].SessionID
		n, err := s.CountEvents(ctx, EventQuery{SessionIDs: []string{sid}})
		if err != nil || n != perG {
			t.Fatalf("session %s: %d events stored, %v", sid, n, err)
		}
	}
	st := s.Stats()
	subs := st.Submissions - before.Submissions
	commits := st.Commits - before.Commits
	t.Logf("%d submissions in %d transactions", subs, commits)
	if subs != goroutines*perG {
		t.Fatalf("Stats.Submissions = %d, want %d", subs, goroutines*perG)
	}
	if commits >= subs/2 {
		t.Fatalf("%d submissions took %d transactions: not grouped", subs, commits)
	}
}

func TestGroupCommitIsolatesFailures(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	m := newMaker(t, "sess_a")
	old := m.next(event.TurnStarted)
	appendAll(t, s, []*event.Event{old})

	release := blockWriter(t, s)
	defer release()
	before := s.Stats()

	// Queue: good, duplicate of a stored event (inside a group with a
	// good one, which must roll back with it), good, a later duplicate
	// of an event earlier in the same batch, a session update on a
	// missing session, good.
	e1, e2, e3, e4 := m.next(event.TurnStarted), m.next(event.TurnStarted), m.next(event.TurnStarted), m.next(event.TurnStarted)
	groupBad := m.next(event.TurnStarted)
	subs := [][]Op{
		{AppendEvent{Event: e1}},
		{AppendEvent{Event: groupBad}, AppendEvent{Event: old}},
		{AppendEvent{Event: e2}},
		{AppendEvent{Event: e3}},
		{AppendEvent{Event: e2}},
		{UpdateSession{ID: "sess_missing", ActiveModel: "m"}},
		{AppendEvent{Event: e4}},
	}
	wantErr := []error{nil, ErrDuplicate, nil, nil, ErrDuplicate, ErrNotFound, nil}
	got := make([]error, len(subs))
	var order []int
	var wg sync.WaitGroup
	wg.Add(len(subs))
	for i, ops := range subs {
		s.Submit(ops, func(err error) {
			got[i] = err
			order = append(order, i) // done runs on the writer goroutine only
			wg.Done()
		})
	}
	release()
	wg.Wait()

	for i := range subs {
		if !errors.Is(got[i], wantErr[i]) || (wantErr[i] == nil) != (got[i] == nil) {
			t.Errorf("submission %d: err %v, want %v", i, got[i], wantErr[i])
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("done order %v", order)
	}
	stored, err := s.Events(ctx, EventQuery{SessionIDs: []string{"sess_a"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := ids([]*event.Event{old, e1, e2, e3, e4}); !slices.Equal(ids(stored), want) {
		t.Fatalf("stored %v, want %v", ids(stored), want)
	}
	if groupBad.Seq != 0 {
		t.Errorf("event of a failed group has Seq %d", groupBad.Seq)
	}
	st := s.Stats()
	// The block's batch, then one batch for all seven with three
	// exclusions: one commit each.
	if c := st.Commits - before.Commits; c != 2 {
		t.Errorf("%d commits, want 2 (the blocked batch and one group)", c)
	}
	if f := st.Failed - before.Failed; f != 3 {
		t.Errorf("Stats.Failed = %d, want 3", f)
	}
}

func TestMaxBatch(t *testing.T) {
	s := openTest(t, Options{MaxBatch: 10})
	m := newMaker(t, "sess_a")
	release := blockWriter(t, s)
	before := s.Stats()
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		ops := []Op{AppendEvent{Event: m.next(event.TurnStarted)}, AppendEvent{Event: m.next(event.TurnStarted)},
			AppendEvent{Event: m.next(event.TurnStarted)}}
		s.Submit(ops, func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	// A group bigger than MaxBatch still commits, alone.
	big := make([]Op, 25)
	for i := range big {
		big[i] = AppendEvent{Event: m.next(event.TurnStarted)}
	}
	wg.Add(1)
	s.Submit(big, func(err error) {
		if err != nil {
			t.Error(err)
		}
		wg.Done()
	})
	release()
	wg.Wait()
	// Blocked batch, then 10 groups of 3 ops at most 3 per transaction
	// (4 transactions), then the big one.
	if c := s.Stats().Commits - before.Commits; c != 1+4+1 {
		t.Errorf("%d commits, want 6", c)
	}
}

func TestCloseDrains(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/trace.db"
	s := openTest(t, Options{Path: path})
	m := newMaker(t, "sess_a")
	evs := m.many(500)
	release := blockWriter(t, s)
	var calls int
	for _, ev := range evs {
		s.Submit([]Op{AppendEvent{Event: ev}}, func(err error) {
			if err != nil {
				t.Error(err)
			}
			calls++ // writer goroutine only; read after Close
		})
	}
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	time.Sleep(10 * time.Millisecond) // let Close start while the writer is busy
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if calls != len(evs) {
		t.Fatalf("%d done calls after Close, want %d", calls, len(evs))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// After Close: submissions fail at once, reads fail.
	var got error
	s.Submit([]Op{AppendEvent{Event: m.next(event.TurnStarted)}}, func(err error) { got = err })
	if !errors.Is(got, ErrClosed) {
		t.Fatalf("Submit after Close: %v", got)
	}
	if err := s.Apply(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply after Close: %v", err)
	}
	if _, err := s.Events(ctx, EventQuery{SessionIDs: []string{"sess_a"}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Events after Close: %v", err)
	}

	s2 := openTest(t, Options{Path: path})
	n, err := s2.CountEvents(ctx, EventQuery{SessionIDs: []string{"sess_a"}})
	if err != nil || n != len(evs) {
		t.Fatalf("after reopen: %d events, %v; want %d", n, err, len(evs))
	}
}

func TestApplyContext(t *testing.T) {
	s := openTest(t, Options{})
	release := blockWriter(t, s)
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	ev := newMaker(t, "sess_a").next(event.TurnStarted)
	if err := s.Apply(ctx, AppendEvent{Event: ev}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Apply with expired ctx: %v", err)
	}
	release()
	// The op was still committed.
	if err := s.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	if last, err := s.LastEventID(context.Background(), "sess_a"); err != nil || last != ev.ID {
		t.Fatalf("LastEventID = %q, %v", last, err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(context.Background(), Options{}); err == nil {
		t.Fatal("Open without path: no error")
	}
	// A path with URI syntax characters is a plain file name.
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir + "/odd?name#1%.db"})
	if err := s.Apply(context.Background(), CreateSession{Session: Session{ID: "s", CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := s.IntegrityCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
}
