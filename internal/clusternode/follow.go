package clusternode

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

// treeFeed counts this node's clients of a tree owned elsewhere.
type treeFeed struct {
	clients int
	leave   func()
}

// followTimeout bounds what the first client of a tree owned elsewhere
// waits for, to start following it: the reads of the log, the
// projection and the feed catching up. Past it the client is refused
// (503 owner_unavailable) and retries.
const followTimeout = 30 * time.Second

// Follow registers a client of a tree owned elsewhere: the first one
// reads the tree's streaming events the log still holds, starts the
// tree's feed right after them, waits until the projection shows
// everything the log held for the tree when the feed started, moves the
// bus's delivery point there, and backfills the hub's rings with those
// streaming events, so the hub's seam splits store (and ring) and feed
// exactly, and a cursor taken on another node replays here as there.
// The returned leave must be called when the client goes.
func (cn *Node) Follow(ctx context.Context, tree, sessionID string) (leave func(), err error) {
	cn.attachMu.Lock()
	defer cn.attachMu.Unlock()
	tf := cn.attached[tree]
	if tf == nil {
		// Bounded: the node's other first clients wait on attachMu.
		ctx, cancel := context.WithTimeout(ctx, followTimeout)
		defer cancel()
		tail, err := cn.log.LastSeq(ctx)
		if err != nil {
			return nil, fmt.Errorf("cluster: follow tree %s: %w", tree, err)
		}
		held, heldFrom, err := cn.log.Streaming(ctx, tree, tail)
		if err != nil {
			return nil, fmt.Errorf("cluster: follow tree %s: %w", tree, err)
		}
		if err := cn.bus.Follow(ctx, sessionID); err != nil {
			return nil, fmt.Errorf("cluster: follow tree %s: %w", tree, err)
		}
		lv, err := cn.feeds.JoinAt(tree, tail)
		if err != nil {
			return nil, err
		}
		seq, err := cn.log.LastCatalogSeq(ctx, tree)
		if err == nil {
			err = cn.proj.WaitApplied(ctx, seq)
		}
		// The delivery point goes to the tree's newest catalog event up
		// to the tail, which the feed will not relay; not to what the
		// store holds, which may be ahead of the feed (the feed would
		// then drop what comes between as delivered).
		through := ""
		switch {
		case err != nil:
		case seq > tail:
			// The feed relays it, and everything after the tail.
			err = cn.feeds.WaitDelivered(ctx, tree, seq)
		case seq > 0:
			var ev *event.Event
			if ev, err = cn.log.EventAt(ctx, seq); err == nil && ev != nil {
				through = ev.ID
			} else if err == nil {
				// An ownership marker or a deletion record: the
				// store up to it.
				err = cn.catchUpTree(ctx, tree)
			}
		}
		if err == nil {
			err = cn.bus.Backfill(ctx, tree, heldFrom, through, held)
		}
		if err != nil {
			lv()
			return nil, fmt.Errorf("cluster: follow tree %s: %w", tree, err)
		}
		tf = &treeFeed{leave: lv}
		cn.attached[tree] = tf
	}
	tf.clients++
	var once sync.Once
	return func() {
		once.Do(func() {
			cn.attachMu.Lock()
			defer cn.attachMu.Unlock()
			if tf.clients--; tf.clients == 0 {
				delete(cn.attached, tree)
				tf.leave()
			}
		})
	}, nil
}

// catchUpTree moves the delivery point of a tree to the newest event
// the store holds for any of its sessions, the planner's and every
// worker's: emitters made for the workers later (a client that includes
// them) no longer move it, since the bus relays the tree.
func (cn *Node) catchUpTree(ctx context.Context, tree string) error {
	queue := []string{tree}
	for n := 0; len(queue) > 0 && n < 10000; n++ {
		id := queue[0]
		queue = queue[1:]
		if err := cn.bus.CatchUp(ctx, id); err != nil {
			return err
		}
		kids, err := cn.st.Children(ctx, id)
		if err != nil {
			return fmt.Errorf("cluster: workers of %s: %w", id, err)
		}
		for _, k := range kids {
			queue = append(queue, k.ID)
		}
	}
	return nil
}
