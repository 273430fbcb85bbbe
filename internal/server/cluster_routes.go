package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/internal/store"
)

// The cluster's handlers besides submit, cancel and streams
// (cluster_http.go): turn feedback routed to the tree's owner, and the
// reads that first let the projection catch up with the log, so that a
// client reads its own writes on any node.

// routes registers them on wrap's mux.
func (cn *clusterNode) routes(mux *http.ServeMux, next http.Handler) {
	mux.HandleFunc("POST /sessions/{id}/turns/{turn_id}/feedback", func(w http.ResponseWriter, r *http.Request) {
		cn.routedFeedback(w, r, next)
	})
	mux.HandleFunc("GET /sessions", func(w http.ResponseWriter, r *http.Request) {
		cn.catchUp(r.Context(), "")
		next.ServeHTTP(w, r)
	})
	caughtUp := func(w http.ResponseWriter, r *http.Request) {
		// A session of a tree owned elsewhere: show at least every
		// catalog event the log held for the tree when the read came.
		if tree, known, err := cn.treeOfRequest(r); err == nil && known && !cn.owns(tree) {
			cn.catchUp(r.Context(), tree)
		}
		next.ServeHTTP(w, r)
	}
	mux.HandleFunc("GET /sessions/{id}", caughtUp)
	mux.HandleFunc("GET /sessions/{id}/messages", caughtUp)
}

// readCatchUp bounds how long a read waits for the projection.
const readCatchUp = 2 * time.Second

// catchUp waits, at most readCatchUp, until the projection applied the
// log's catalog tail: of tree, or of every tree when tree is "". A read
// that follows shows every catalog event the log had committed when
// catchUp was called, wherever it was written. It never fails the
// read: on a timeout or an error the read answers from what the store
// shows (and the metric says so).
func (cn *clusterNode) catchUp(ctx context.Context, tree string) {
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

// treeOfRequest returns the tree of the request's session. A session
// this node does not know may have been created on another node an
// instant ago: the node catches up with the log once and looks again.
// known is false if the session is still unknown.
func (cn *clusterNode) treeOfRequest(r *http.Request) (tree string, known bool, err error) {
	sid := r.PathValue("id")
	tree, err = cn.treeOf(r.Context(), sid)
	if errors.Is(err, store.ErrNotFound) {
		cn.catchUp(r.Context(), "")
		tree, err = cn.treeOf(r.Context(), sid)
	}
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	return tree, err == nil, err
}

// routedFeedback answers a turn's feedback for a tree owned elsewhere
// by forwarding it to the owner; a tree nobody owns is taken by this
// node, which answers it itself. The body is decoded as the API
// decodes it, and the owner's answer (the event id, or its error) is
// given as its API would give it.
func (cn *clusterNode) routedFeedback(w http.ResponseWriter, r *http.Request, next http.Handler) {
	tree := cn.remoteTree(r)
	if tree == "" {
		next.ServeHTTP(w, r)
		return
	}
	body, ok := readRouted(w, r)
	if !ok {
		return
	}
	var req struct {
		Rating  string `json:"rating"`
		Comment string `json:"comment"`
	}
	if !api.Decode(w, r, &req, false) {
		return
	}
	rep, err := cn.router.Feedback(r.Context(), tree, cluster.FeedbackRequest{SessionID: r.PathValue("id"),
		TurnID: r.PathValue("turn_id"), Rating: req.Rating, Comment: req.Comment})
	if cn.forwardFailed(w, r, next, tree, body, err) {
		return
	}
	api.WriteJSON(w, http.StatusCreated, map[string]string{"event_id": rep.EventID})
}

// readRouted reads the body of a request to forward (at most
// maxRoutedBody, NATS's default maximum payload) and puts it back in r
// for the API's decoder. A body it cannot read is answered as the API
// answers it, except for the limit.
func readRouted(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRoutedBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			api.WriteError(w, http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge, "request body is larger than 1 MiB")
		case errors.Is(err, os.ErrDeadlineExceeded):
			api.WriteError(w, http.StatusRequestTimeout, api.CodeRequestTimeout, "the body did not arrive in time")
		default:
			api.WriteError(w, http.StatusBadRequest, api.CodeInvalidRequest, "could not read the body: "+err.Error())
		}
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// Feedback implements cluster.Handler: a turn's feedback routed from
// another node.
func (cn *clusterNode) Feedback(ctx context.Context, tree string, req cluster.FeedbackRequest) (cluster.FeedbackReply, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return cluster.FeedbackReply{}, err
	}
	id, err := cn.sessions.Feedback(ctx, req.SessionID, req.TurnID, req.Rating, req.Comment)
	if err != nil {
		return cluster.FeedbackReply{}, remoteError(err)
	}
	return cluster.FeedbackReply{EventID: id}, nil
}
