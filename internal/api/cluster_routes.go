package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/protocol"
)

// The cluster front's handlers besides submit, cancel and streams
// (cluster.go): turn feedback routed to the tree's owner, and the
// reads that first let the projection catch up with the log, so that a
// client reads its own writes on any node.

// clusterRoutes registers them on ClusterFront's mux.
func clusterRoutes(cn Cluster, mux *http.ServeMux, next http.Handler) {
	mux.HandleFunc("POST /sessions/{id}/turns/{turn_id}/feedback", func(w http.ResponseWriter, r *http.Request) {
		routedFeedback(cn, w, r, next)
	})
	mux.HandleFunc("GET /sessions", func(w http.ResponseWriter, r *http.Request) {
		cn.CatchUp(r.Context(), "")
		next.ServeHTTP(w, r)
	})
	caughtUp := func(w http.ResponseWriter, r *http.Request) {
		// A session of a tree owned elsewhere: show at least every
		// catalog event the log held for the tree when the read came.
		if tree, known, err := cn.SessionTree(r.Context(), r.PathValue("id")); err == nil && known && !cn.Owns(tree) {
			cn.CatchUp(r.Context(), tree)
		}
		next.ServeHTTP(w, r)
	}
	mux.HandleFunc("GET /sessions/{id}", caughtUp)
	mux.HandleFunc("GET /sessions/{id}/messages", caughtUp)
}

// routedFeedback answers a turn's feedback for a tree owned elsewhere
// by forwarding it to the owner; a tree nobody owns is taken by this
// node, which answers it itself. The body is decoded as the API
// decodes it, and the owner's answer (the event id, or its error) is
// given as its API would give it.
func routedFeedback(cn Cluster, w http.ResponseWriter, r *http.Request, next http.Handler) {
	tree := cn.RemoteTree(r.Context(), r.PathValue("id"))
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
	if !decode(w, r, &req, false) {
		return
	}
	rep, err := cn.Router().Feedback(r.Context(), tree, cluster.FeedbackRequest{SessionID: r.PathValue("id"),
		TurnID: r.PathValue("turn_id"), Rating: req.Rating, Comment: req.Comment})
	if forwardFailed(cn, w, r, next, tree, body, err) {
		return
	}
	WriteJSON(w, http.StatusCreated, map[string]string{"event_id": rep.EventID})
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
			WriteError(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "request body is larger than 1 MiB")
		case errors.Is(err, os.ErrDeadlineExceeded):
			WriteError(w, http.StatusRequestTimeout, CodeRequestTimeout, "the body did not arrive in time")
		default:
			WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "could not read the body: "+err.Error())
		}
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// ClusterStatus answers GET /cluster: the cluster's nodes, leases and
// lag in cluster mode (cn set), a 404 not_clustered single-node.
func ClusterStatus(cn Cluster) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if cn == nil {
			WriteError(w, http.StatusNotFound, protocol.CodeNotClustered,
				"this server runs single-node (started without --nats): there is no cluster to show")
			return
		}
		st, err := cn.Status(r.Context())
		if err != nil {
			cn.Logger().Error("cluster status", "err", err)
			WriteError(w, http.StatusServiceUnavailable, protocol.CodeClusterUnavailable,
				fmt.Sprintf("could not read the cluster's state from NATS: %v", err))
			return
		}
		WriteJSON(w, http.StatusOK, st)
	}
}
