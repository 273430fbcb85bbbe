package clusternode

import (
	"context"
	"errors"
	"time"

	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/internal/store"
)

// Reading your own writes on any node (docs/scale-out.md, "Reading
// your own writes anywhere"): a read first lets the projection catch
// up with the log, so a client reads on any node what it wrote on
// another.

// readCatchUp bounds how long a read waits for the projection.
const readCatchUp = 2 * time.Second

// CatchUp waits, at most readCatchUp, until the projection applied the
// log's catalog tail: of tree, or of every tree when tree is "". A read
// that follows shows every catalog event the log had committed when
// CatchUp was called, wherever it was written. It never fails the
// read: on a timeout or an error the read answers from what the store
// shows (and the metric says so).
func (cn *Node) CatchUp(ctx context.Context, tree string) {
	ctx, cancel := context.WithTimeout(ctx, readCatchUp)
	defer cancel()
	var (
		seq uint64
		err error
	)
	if tree == "" {
		seq, err = cn.log.LastCatalogSeqAll(ctx)
	} else {
		seq, err = cn.log.LastCatalogSeq(ctx, tree)
	}
	result := metrics.CatchUpCurrent
	switch {
	case err != nil:
		result = metrics.CatchUpFailed
	case cn.proj.Applied() < seq:
		result = metrics.CatchUpCaughtUp
		err = cn.proj.WaitApplied(ctx, seq)
		if errors.Is(err, context.DeadlineExceeded) {
			result = metrics.CatchUpTimeout
		} else if err != nil {
			result = metrics.CatchUpFailed
		}
	}
	if err != nil {
		cn.logger.Warn("cluster: read without catching up with the log", "tree", tree, "err", err)
	}
	if cn.status != nil {
		cn.status.metrics.ReadCatchUp(result)
	}
}

// SessionTree returns the tree of a session. A session this node does
// not know may have been created on another node an instant ago: the
// node catches up with the log once and looks again. known is false if
// the session is still unknown.
func (cn *Node) SessionTree(ctx context.Context, sessionID string) (tree string, known bool, err error) {
	tree, err = cn.treeOf(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		cn.CatchUp(ctx, "")
		tree, err = cn.treeOf(ctx, sessionID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	return tree, err == nil, err
}

// RemoteTree returns the tree of a session if another node owns it (or
// nobody does); "" when this node owns it or the session is unknown
// here (the API answers then).
func (cn *Node) RemoteTree(ctx context.Context, sessionID string) string {
	tree, known, err := cn.SessionTree(ctx, sessionID)
	if err != nil || !known || cn.owns(tree) {
		return ""
	}
	return tree
}
