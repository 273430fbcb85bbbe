package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/metis-agent/metis/protocol"
)

// The cluster front's reads (besides streams, cluster.go): they first
// let the projection catch up with the log, so that a client reads its
// own writes on any node.

// clusterReads registers them on ClusterFront's mux.
func clusterReads(cn Cluster, mux *http.ServeMux, next http.Handler) {
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
