package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/metis-agent/metis/internal/event"
)

// Sink receives a tree's events, both families, in stream order (id
// order within the tree): the node's live sink (the hub's Publish). It
// must not block.
type Sink interface {
	Publish(ev *event.Event)
}

// GapSink is a Sink that is told when a feed finds that events of a
// tree never reached the log (epoch.go): the owner published events
// after the last one the feed handed over, up to and including through,
// that the log does not hold. It is called before the event that showed
// the gap is handed over, and must not block.
type GapSink interface {
	Gap(tree, through string)
}

// Feeds runs one ordered consumer per tree that has local clients,
// fanning its events out to the node's sink: N clients of a tree on a
// node cost one consumer.
type Feeds struct {
	log    *Log
	proj   *Projection // nil: catalog events are handed over unwaited
	sink   Sink
	logger *slog.Logger

	mu    sync.Mutex
	trees map[string]*feed
	wg    sync.WaitGroup

	late atomic.Uint64 // events of deposed owners dropped
	gaps atomic.Uint64 // gaps found (events that never reached the log)
}

type feed struct {
	refs      int
	cancel    context.CancelFunc
	done      chan struct{}
	delivered atomic.Uint64 // stream sequence of the last event handed to the sink
	catalog   atomic.Uint64 // stream sequence of the last catalog event handed to the sink

	movedMu sync.Mutex
	moved   chan struct{} // closed and replaced when delivered moves (feed_wait.go)
}

// NewFeeds returns the feeds of a node.
func NewFeeds(log *Log, sink Sink, logger *slog.Logger) *Feeds {
	if logger == nil {
		logger = slog.Default()
	}
	return &Feeds{log: log, sink: sink, logger: logger, trees: map[string]*feed{}}
}

// NewAppliedFeeds returns the feeds of a node whose sink must never get
// a catalog event before the node's store shows it: each catalog event
// is handed over only once proj applied it, so a snapshot or replay the
// sink's clients are served from the store is never older than an
// event they already received.
func NewAppliedFeeds(log *Log, proj *Projection, sink Sink, logger *slog.Logger) *Feeds {
	f := NewFeeds(log, sink, logger)
	f.proj = proj
	return f
}

// Join registers a local client of tree. The first one starts the
// tree's consumer at the stream's tail: every event of the tree appended
// from then on reaches the sink (history comes from the projection).
// leave must be called once when the client goes; the last one stops the
// consumer.
func (f *Feeds) Join(ctx context.Context, tree string) (leave func(), err error) {
	tail, err := f.log.LastSeq(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: feed %s: %w", tree, err)
	}
	return f.JoinAt(tree, tail)
}

// JoinAt is Join with the tail given: the first client starts the
// tree's consumer after stream sequence tail (a caller that read the
// tree's history up to tail itself, see Log.Streaming). A feed already
// running goes on from where it is.
func (f *Feeds) JoinAt(tree string, tail uint64) (leave func(), err error) {
	if err := ValidToken(tree); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fd := f.trees[tree]
	if fd == nil {
		fctx, cancel := context.WithCancel(context.Background())
		fd = &feed{cancel: cancel, done: make(chan struct{}), moved: make(chan struct{})}
		fd.delivered.Store(tail)
		f.trees[tree] = fd
		f.wg.Add(1)
		go f.run(fctx, tree, fd, ReadFrom(tail+1))
	}
	fd.refs++
	var once sync.Once
	return func() { once.Do(func() { f.leave(tree, fd) }) }, nil
}

func (f *Feeds) leave(tree string, fd *feed) {
	f.mu.Lock()
	fd.refs--
	last := fd.refs == 0
	if last && f.trees[tree] == fd {
		delete(f.trees, tree)
	}
	f.mu.Unlock()
	if last {
		fd.cancel()
		<-fd.done
	}
}

func (f *Feeds) run(ctx context.Context, tree string, fd *feed, from ReadFrom) {
	defer f.wg.Done()
	defer close(fd.done)
	// The tree's epoch as of where the feed starts: its newest ownership
	// marker (read after the caller fixed from, so a marker before from
	// is counted and one after it is read by the feed).
	epoch, err := f.log.lastOn(ctx, ownerSubject(tree))
	if err != nil && ctx.Err() == nil {
		f.logger.Warn("cluster: feed: the tree's epoch could not be read; a deposed owner's late events before the next takeover are not dropped", "tree", tree, "err", err)
	}
	last := ""    // the id of the last event handed over
	lateMax := "" // the newest event of a deposed owner dropped (a successor's first Prev may name it)
	err = f.log.Follow(ctx, TreeFilter(tree), from, func(e Entry) error {
		switch {
		case e.Err != nil:
			f.logger.Error("cluster: feed skips a bad record", "tree", tree, "seq", e.Seq, "err", e.Err)
		case e.Marker:
			epoch = max(epoch, e.Seq)
		case e.Deleted != "":
			// A deletion (deletion.go): the projection removes the
			// session; its clients here get nothing more, as on the
			// owner.
		case e.Deposed(epoch):
			// Sent by an owner after its successor took the tree: its
			// turn was ended by the successor already.
			f.late.Add(1)
			lateMax = max(lateMax, e.Event.ID)
			f.logger.Info("cluster: feed drops an event of a deposed owner", "tree", tree, "event", e.Event.ID,
				"type", e.Event.Type, "epoch", e.Epoch, "tree_epoch", epoch)
		default:
			if gs, ok := f.sink.(GapSink); ok && last != "" && e.Prev > max(last, lateMax) {
				// The owner published events after last that the log
				// does not hold (lost with a leader, or refused).
				f.gaps.Add(1)
				f.logger.Warn("cluster: events of the tree never reached the log; its clients here are told of the gap",
					"tree", tree, "after", last, "through", e.Prev)
				gs.Gap(tree, e.Prev)
			}
			if f.proj != nil && event.FamilyOf(e.Event.Type) == event.Catalog {
				if err := f.proj.WaitApplied(ctx, e.Seq); err != nil {
					return err
				}
			}
			f.sink.Publish(e.Event)
			last = max(last, e.Event.ID)
			if event.FamilyOf(e.Event.Type) == event.Catalog {
				fd.catalog.Store(e.Seq)
			}
		}
		fd.delivered.Store(e.Seq)
		fd.notify()
		return nil
	})
	if err != nil && ctx.Err() == nil {
		f.logger.Error("cluster: feed stopped", "tree", tree, "err", err)
	}
}

// Delivered returns, for a tree with a running feed, the stream
// sequence of the last message its feed handled and of the last catalog
// event it handed to the sink. A node that builds a snapshot for a
// client of the tree waits until its projection applied the latter.
func (f *Feeds) Delivered(tree string) (last, catalog uint64, ok bool) {
	f.mu.Lock()
	fd := f.trees[tree]
	f.mu.Unlock()
	if fd == nil {
		return 0, 0, false
	}
	return fd.delivered.Load(), fd.catalog.Load(), true
}

// Late counts the events of deposed owners the feeds dropped: sent
// after another node took their tree.
func (f *Feeds) Late() uint64 { return f.late.Load() }

// Gaps counts the gaps the feeds found: events an owner published that
// never reached the log.
func (f *Feeds) Gaps() uint64 { return f.gaps.Load() }

// Close stops every feed and waits for them.
func (f *Feeds) Close() {
	f.mu.Lock()
	for tree, fd := range f.trees {
		fd.cancel()
		delete(f.trees, tree)
	}
	f.mu.Unlock()
	f.wg.Wait()
}
