package bus

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// fakeStore is an in-memory Store that commits submissions in order on
// its own goroutine, in batches, like the real writer.
type fakeStore struct {
	mu      sync.Mutex
	events  []*event.Event // committed, in seq order
	queue   chan sub
	fail    func(ops []store.Op) error
	delay   time.Duration
	stopped chan struct{}
	parents map[string]string // session → parent, for Session
}

type sub struct {
	ops  []store.Op
	done func(error)
}

func newFakeStore() *fakeStore {
	f := &fakeStore{queue: make(chan sub, 1024), stopped: make(chan struct{})}
	go f.run()
	return f
}

func (f *fakeStore) run() {
	defer close(f.stopped)
	for s := range f.queue {
		batch := []sub{s}
	more:
		for len(batch) < 64 {
			select {
			case s, ok := <-f.queue:
				if !ok {
					break more
				}
				batch = append(batch, s)
			default:
				break more
			}
		}
		if f.delay > 0 {
			time.Sleep(f.delay)
		}
		for _, s := range batch {
			var err error
			if f.fail != nil {
				err = f.fail(s.ops)
			}
			if err == nil {
				f.mu.Lock()
				for _, op := range s.ops {
					if a, ok := op.(store.AppendEvent); ok {
						a.Event.Seq = int64(len(f.events) + 1)
						f.events = append(f.events, a.Event)
					}
				}
				f.mu.Unlock()
			}
			if s.done != nil {
				s.done(err)
			}
		}
	}
}

func (f *fakeStore) close() { close(f.queue); <-f.stopped }

func (f *fakeStore) Submit(ops []store.Op, done func(error)) { f.queue <- sub{ops, done} }

func (f *fakeStore) LastEventID(_ context.Context, sessionID string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := ""
	for _, e := range f.events {
		if e.SessionID == sessionID && e.ID > last {
			last = e.ID
		}
	}
	return last, nil
}

func (f *fakeStore) Session(_ context.Context, id string) (store.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.parents[id]; ok {
		return store.Session{ID: id, ParentSessionID: p}, nil
	}
	return store.Session{}, store.ErrNotFound
}

func (f *fakeStore) EventsAfterSeq(_ context.Context, after int64, limit int) ([]*event.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := sort.Search(len(f.events), func(i int) bool { return f.events[i].Seq > after })
	j := min(len(f.events), i+limit)
	return append([]*event.Event(nil), f.events[i:j]...), nil
}

func (f *fakeStore) committed(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.events {
		if e.ID == id {
			return true
		}
	}
	return false
}

// recorder is a LiveSink that records what it is given and checks the
// bus's promises as events arrive.
type recorder struct {
	st     *fakeStore
	mu     sync.Mutex
	got    map[string][]*event.Event
	errors []string
}

func newRecorder(st *fakeStore) *recorder { return &recorder{st: st, got: map[string][]*event.Event{}} }

func (r *recorder) Publish(ev *event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if event.FamilyOf(ev.Type) == event.Catalog && !r.st.committed(ev.ID) {
		r.errors = append(r.errors, "uncommitted catalog event delivered: "+ev.ID)
	}
	s := r.got[ev.SessionID]
	if n := len(s); n > 0 && s[n-1].ID >= ev.ID {
		r.errors = append(r.errors, "out of order: "+ev.ID+" after "+s[n-1].ID)
	}
	r.got[ev.SessionID] = append(s, ev)
}

func (r *recorder) events(session string) []*event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*event.Event(nil), r.got[session]...)
}
