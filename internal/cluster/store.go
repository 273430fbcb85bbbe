package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// LocalStore is a node's trace store, the projection's target, as the
// bus reads it.
type LocalStore interface {
	ProjectionStore
	LastEventID(ctx context.Context, sessionID string) (string, error)
	EventsAfterSeq(ctx context.Context, afterSeq int64, limit int) ([]*event.Event, error)
	Session(ctx context.Context, id string) (store.Session, error)
}

// OwnerFunc returns this node's owner of a tree, taking the tree if the
// node does not own it yet; it fails if another node does.
type OwnerFunc func(ctx context.Context, tree string) (*Owner, error)

// Store is the bus's store in cluster mode (it implements bus.Store):
// a group of ops is published to the log, fenced, by the tree's owner,
// and its done is called only once the stream acknowledged it and the
// node's own projection applied it. So a catalog event reaches the live
// sink and the subscribers only after it is in the log ("committed
// before seen", with the quorum of the stream's replicas instead of a
// local COMMIT), and the node's store shows it by then.
//
// Groups of one tree are published in Submit order by one goroutine per
// tree; trees do not wait for each other.
type Store struct {
	local  LocalStore
	proj   *Projection
	owner  OwnerFunc
	logger *slog.Logger

	mu     sync.Mutex
	trees  map[string]*publisher
	roots  map[string]string // session -> tree, learned from the groups and the store
	closed bool
	wg     sync.WaitGroup

	unsent atomic.Uint64 // streaming events not sent (Unsent)
}

type group struct {
	ev        *event.Event
	ops       []store.Op
	done      func(error)
	streaming bool   // a streaming event: published unfenced, not applied
	barrier   bool   // no event: done once the groups queued before it are
	deleted   string // no event: a deletion record of this session (deletion.go)
}

// publisher publishes one tree's groups in order.
type publisher struct {
	mu    sync.Mutex
	queue []group
	wake  chan struct{} // one slot: there is work
	stop  chan struct{}
}

// ownTimeout bounds taking a tree before its first publish.
const ownTimeout = 30 * time.Second

// ErrStoreClosed is given to the done of a group submitted after Close.
var ErrStoreClosed = errors.New("cluster: store closed")

// NewStore returns the cluster store of a node. proj must be running on
// local.
func NewStore(local LocalStore, proj *Projection, owner OwnerFunc) *Store {
	return &Store{local: local, proj: proj, owner: owner, logger: slog.Default(), trees: map[string]*publisher{}, roots: map[string]string{}}
}

// SetLogger sets the store's logger (default slog.Default()). Call it
// before the first Submit.
func (s *Store) SetLogger(l *slog.Logger) {
	if l != nil {
		s.logger = l
	}
}

// Submit queues a group: the ops of one catalog event, its AppendEvent
// last. done is called once, after the stream acknowledged the event and
// the local projection applied it, or with the reason it was not
// committed (a fenced publish: another node owns the tree now).
func (s *Store) Submit(ops []store.Op, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	var ev *event.Event
	for _, op := range ops {
		if a, ok := op.(store.AppendEvent); ok {
			if ev != nil {
				done(errors.New("cluster: a group appends more than one event"))
				return
			}
			ev = a.Event
		}
	}
	if ev == nil {
		if len(ops) == 0 {
			s.barrier(done) // bus.Emitter.Barrier
			return
		}
		done(errors.New("cluster: a group without an event cannot be published"))
		return
	}
	tree, err := s.treeOf(context.Background(), ev.SessionID, ops)
	if err != nil {
		done(err)
		return
	}
	s.enqueue(tree, group{ev: ev, ops: ops, done: done})
}

// AppendStreaming queues a streaming event (it implements
// bus.StreamingStore): the tree's owner publishes it in order with the
// tree's catalog groups, so every node's feed hands the tree's events
// to its clients in id order, and done says when this node may deliver
// it to its own clients: once it was sent, by an owner that confirmed
// its lease (Owner.Confirm) before and after. A streaming event that
// cannot be published (the node lost the tree, the log is unreachable)
// is dropped (done gets the error; the bus never delivers it); one the
// stream refuses after it was sent is a gap for other nodes' readers,
// which tell their clients (epoch.go).
func (s *Store) AppendStreaming(ev *event.Event, done func(error)) {
	tree, err := s.treeOf(context.Background(), ev.SessionID, nil)
	if err != nil {
		done(err)
		return
	}
	s.enqueue(tree, group{ev: ev, done: done, streaming: true})
}

// DeleteTree deletes a session and every worker below it on every node
// (it implements session.Deleter): del deletes them from this node's
// store (it checks that none of them is running, and its error is
// returned as it is), then a deletion record (deletion.go) is published
// to the log in order with the tree's groups, by the tree's owner, and
// DeleteTree returns once the stream acknowledged it and this node's
// projection applied it. If the record cannot be published (this node
// lost the tree meanwhile), the session is gone from this node's store
// only, and the error says so.
func (s *Store) DeleteTree(ctx context.Context, session string, del func(context.Context) error) error {
	tree, err := s.treeOf(ctx, session, nil)
	if err != nil {
		return err
	}
	if err := del(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.roots, session)
	s.mu.Unlock()
	done := make(chan error, 1)
	s.enqueue(tree, group{deleted: session, done: func(err error) { done <- err }})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("cluster: delete %s: %w", session, context.Cause(ctx))
	}
}

// Tree returns the root of a session's delegation tree, as the node's
// store (or a group it published) knows it.
func (s *Store) Tree(ctx context.Context, session string) (string, error) {
	return s.treeOf(ctx, session, nil)
}

func (s *Store) enqueue(tree string, g group) {
	done := g.done
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		done(ErrStoreClosed)
		return
	}
	p := s.trees[tree]
	if p == nil {
		p = &publisher{wake: make(chan struct{}, 1), stop: make(chan struct{})}
		s.trees[tree] = p
		s.wg.Add(1)
		go s.run(tree, p)
	}
	p.mu.Lock()
	p.queue = append(p.queue, g)
	p.mu.Unlock()
	s.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// barrier calls done once every group submitted before it, of every
// tree, has been published and its done called, as the SQLite store's
// writer does for an empty group (bus.Emitter.Barrier).
func (s *Store) barrier(done func(error)) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		done(ErrStoreClosed)
		return
	}
	// One count per tree, and one for this call: the last to finish
	// calls done.
	var left atomic.Int64
	left.Store(int64(len(s.trees)) + 1)
	finish := func(error) {
		if left.Add(-1) == 0 {
			done(nil)
		}
	}
	ps := make([]*publisher, 0, len(s.trees))
	for _, p := range s.trees {
		p.mu.Lock()
		p.queue = append(p.queue, group{barrier: true, done: finish})
		p.mu.Unlock()
		ps = append(ps, p)
	}
	s.mu.Unlock()
	for _, p := range ps {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	finish(nil)
}

// treeOf returns the root of session's delegation tree: a session
// created by this group names its parent; others are read from the
// store once and remembered.
func (s *Store) treeOf(ctx context.Context, session string, ops []store.Op) (string, error) {
	orig, parent, known := session, "", false
	for _, op := range ops {
		if c, ok := op.(store.CreateSession); ok && c.Session.ID == session {
			parent, known = c.Session.ParentSessionID, true
		}
	}
	s.mu.Lock()
	tree, ok := s.roots[session]
	s.mu.Unlock()
	if ok {
		return tree, nil
	}
	for range 64 { // delegation depth is small; this bounds a corrupt chain
		if !known {
			row, err := s.local.Session(ctx, session)
			if err != nil {
				return "", fmt.Errorf("cluster: tree of %s: %w", session, err)
			}
			parent = row.ParentSessionID
		}
		if parent == "" {
			tree = session
			break
		}
		s.mu.Lock()
		t, ok := s.roots[parent]
		s.mu.Unlock()
		if ok {
			tree = t
			break
		}
		session, known = parent, false
	}
	if tree == "" {
		return "", fmt.Errorf("cluster: tree of %s: delegation chain too deep", session)
	}
	s.mu.Lock()
	s.roots[orig], s.roots[session] = tree, tree
	s.mu.Unlock()
	return tree, nil
}

func (s *Store) run(tree string, p *publisher) {
	defer s.wg.Done()
	for {
		p.mu.Lock()
		batch := p.queue
		p.queue = nil
		p.mu.Unlock()
		s.publishAll(tree, batch)
		if len(batch) > 0 {
			continue
		}
		select {
		case <-p.wake:
		case <-p.stop:
			p.mu.Lock()
			rest := p.queue
			p.queue = nil
			p.mu.Unlock()
			s.publishAll(tree, rest)
			return
		}
	}
}

// publishAll publishes a batch of one tree's groups in order, and calls
// each group's done. The streaming events of a run of them are sent
// together, and their dones called (their local delivery) once they all
// were: local delivery never holds the next sends up.
func (s *Store) publishAll(tree string, batch []group) {
	for i := 0; i < len(batch); {
		if !batch[i].streaming {
			batch[i].done(moved(s.publish(tree, batch[i])))
			i++
			continue
		}
		j := i + 1
		for j < len(batch) && batch[j].streaming {
			j++
		}
		s.publishStreaming(tree, batch[i:j])
		i = j
	}
}

// moved marks an error that says this node no longer writes the tree
// (its lease lost, taken, released, or a publish fenced) as bus.ErrMoved:
// the bus drops the event quietly and an agent loop stops as at
// shutdown, leaving the turn to the tree's new owner.
func moved(err error) error {
	if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrFenced) || errors.Is(err, ErrLeaseReleased) {
		return fmt.Errorf("%w: %w", bus.ErrMoved, err)
	}
	return err
}

// publishStreaming sends a run of streaming events of a tree, in order
// with its catalog publishes, without waiting for their
// acknowledgements (the log counts and reports one the stream refuses),
// and calls their dones. A node that may have been deposed without
// knowing it (paused past its lease, cut off) confirms its lease before
// it sends and, since it may have been paused in between, again before
// its own clients get the events.
func (s *Store) publishStreaming(tree string, gs []group) {
	errs := make([]error, len(gs))
	done := func(err error) {
		for k, g := range gs {
			if errs[k] == nil {
				errs[k] = err
			}
			g.done(moved(errs[k]))
		}
	}
	actx, cancel := context.WithTimeout(context.Background(), ownTimeout)
	o, err := s.owner(actx, tree)
	cancel()
	if err == nil {
		err = o.Confirm(o.Context())
	}
	if err != nil {
		s.unsent.Add(uint64(len(gs)))
		done(fmt.Errorf("cluster: publish %s: %w", gs[0].ev.ID, err))
		return
	}
	for k, g := range gs {
		if errs[k] = o.PublishStreamingAsync(g.ev); errs[k] != nil {
			s.unsent.Add(1)
		}
	}
	// Sent; if this node may have lost the tree meanwhile, its own
	// clients do not get them (every other node drops them if a
	// successor's marker came first).
	if err := o.Confirm(o.Context()); err != nil {
		done(fmt.Errorf("cluster: deliver %s: %w", gs[0].ev.ID, err))
		return
	}
	done(nil)
}

func (s *Store) publish(tree string, g group) error {
	if g.barrier {
		return nil
	}
	actx, cancel := context.WithTimeout(context.Background(), ownTimeout)
	o, err := s.owner(actx, tree)
	cancel()
	if err != nil {
		return fmt.Errorf("cluster: commit %s: %w", g, err)
	}
	ctx := o.Context()
	var p Published
	if g.deleted != "" {
		p, err = o.PublishDeletion(ctx, g.deleted)
	} else {
		p, err = o.PublishCatalog(ctx, g.ev, g.ops)
	}
	if err != nil {
		return err
	}
	if err := s.proj.WaitApplied(ctx, p.Seq); err != nil {
		return fmt.Errorf("cluster: commit %s: %w", g, err)
	}
	return nil
}

// String names a group's event, or its deletion, in errors.
func (g group) String() string {
	if g.deleted != "" {
		return "the deletion of " + g.deleted
	}
	return g.ev.ID
}

// Unsent counts the streaming events this node never sent to the log
// (and never delivered): it had lost the tree, or could not confirm its
// lease, or the publish failed before it was sent.
func (s *Store) Unsent() uint64 { return s.unsent.Load() }

// Close stops taking groups, publishes those queued and waits for the
// per-tree goroutines.
func (s *Store) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for _, p := range s.trees {
			close(p.stop)
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// LastEventID returns the newest event id of a session in the local
// projection.
func (s *Store) LastEventID(ctx context.Context, sessionID string) (string, error) {
	return s.local.LastEventID(ctx, sessionID)
}

// EventsAfterSeq reads the local projection.
func (s *Store) EventsAfterSeq(ctx context.Context, afterSeq int64, limit int) ([]*event.Event, error) {
	return s.local.EventsAfterSeq(ctx, afterSeq, limit)
}

// Session reads the local projection.
func (s *Store) Session(ctx context.Context, id string) (store.Session, error) {
	return s.local.Session(ctx, id)
}
