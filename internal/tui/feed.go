package tui

import (
	"context"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// Frame pacing: the conversation is re-rendered at most once per
// frameInterval however fast events arrive; while a turn is in flight
// the activity bar's spinner advances every spinInterval even when
// nothing arrives.
const (
	frameInterval = time.Second / 30
	spinInterval  = 120 * time.Millisecond
)

// followEnded is the kind of the item queued when Follow returns.
const followEnded client.UpdateKind = 0

// item is one thing Follow reported, queued for the next frame.
type item struct {
	kind    client.UpdateKind // or followEnded (err says why)
	event   *protocol.EventEnvelope
	view    *client.View // Subscribed: a copy of Follow's view
	err     error
	attempt int
}

// feed carries Follow's updates from its goroutine to the program's. The
// Follow side appends and wakes; the program drains everything queued
// once per frame, so a burst of deltas costs one render. The program
// folds the events into its own View: nothing is shared but the queue.
type feed struct {
	mu    sync.Mutex
	items []item
	wake  chan struct{}
}

func newFeed() *feed { return &feed{wake: make(chan struct{}, 1)} }

// push is Follow's OnUpdate. Follow's view may only be read during the
// callback, so a subscription (after a snapshot or a replay) carries a
// clone; events are applied to the program's view on its side.
func (f *feed) push(u client.Update) {
	it := item{kind: u.Kind, event: u.Event, err: u.Err, attempt: u.Attempt}
	if u.Kind == client.Subscribed && u.View != nil {
		it.view = u.View.Clone()
	}
	f.add(it)
}

// ended reports that Follow returned.
func (f *feed) ended(err error) { f.add(item{kind: followEnded, err: err}) }

func (f *feed) add(it item) {
	f.mu.Lock()
	f.items = append(f.items, it)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// drain takes everything queued.
func (f *feed) drain() []item {
	f.mu.Lock()
	defer f.mu.Unlock()
	items := f.items
	f.items = nil
	return items
}

// frameMsg asks the model to take what the feed holds and redraw.
type frameMsg struct{}

// nextFrame waits until the feed has something (or, when busy, until the
// spinner is due) and then until a frame has passed since the last one.
// Exactly one nextFrame is outstanding at any time; it returns nil when
// ctx ends, so it never outlives the program.
func nextFrame(ctx context.Context, f *feed, last time.Time, busy bool) tea.Cmd {
	return func() tea.Msg {
		var spin <-chan time.Time
		if busy {
			t := time.NewTimer(spinInterval)
			defer t.Stop()
			spin = t.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.wake:
		case <-spin:
		}
		if d := frameInterval - time.Since(last); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
		return frameMsg{}
	}
}
