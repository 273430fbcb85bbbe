package clusternode

import (
	"context"
	"time"
)

// cursorCatchUp bounds how long a subscribe waits for this node to
// deliver through a cursor taken on another node.
const cursorCatchUp = readCatchUp

// cursorPoll is how often awaitCursor looks at the delivery point once
// the feed has delivered what the log held.
const cursorPoll = 5 * time.Millisecond

// AwaitCursor is the hub's Config.AwaitCursor in cluster mode. A client
// resuming here with a cursor it got from another node (the owner, or a
// node whose feed is ahead of this one's) may be a moment ahead of what
// this node has delivered of the tree: without waiting, the subscribe
// would find the cursor past the seam and refuse it (invalid_cursor).
// It waits, at most cursorCatchUp, until the tree's feed here has
// delivered everything the log holds for the tree, then until the
// tree's delivery point reaches the cursor (a streaming event the owner
// delivered before its publish reached the log). A cursor the tree
// never delivered (made up, or of a streaming event that never reached
// the log) costs the subscribe that bound, then is judged as a single
// node judges it. The owner of the tree has delivered every id it
// handed out: it does not wait.
func (cn *Node) AwaitCursor(ctx context.Context, sessionID, since string) {
	tree, err := cn.treeOf(ctx, sessionID)
	if err != nil || cn.owns(tree) {
		return
	}
	em, err := cn.bus.Emitter(ctx, sessionID)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cursorCatchUp)
	defer cancel()
	seq, err := cn.log.LastTreeSeq(ctx, tree)
	if err == nil {
		err = cn.feeds.WaitDelivered(ctx, tree, seq)
	}
	if err != nil {
		cn.logger.Debug("cluster: cursor wait", "session", sessionID, "since", since, "err", err)
		return
	}
	t := time.NewTicker(cursorPoll)
	defer t.Stop()
	for em.LastDelivered() < since {
		select {
		case <-t.C:
		case <-ctx.Done():
			cn.logger.Debug("cluster: cursor not delivered here in time", "session", sessionID, "since", since)
			return
		}
	}
}
