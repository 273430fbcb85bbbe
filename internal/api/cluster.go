package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/protocol"
)

// Cluster is what the API's cluster front needs of the node it serves
// on (a *clusternode.Node; docs/scale-out.md).
type Cluster interface {
	// RemoteTree returns the tree of a session if another node owns it
	// (or nobody does); "" when this node owns it or the session is
	// unknown here.
	RemoteTree(ctx context.Context, sessionID string) string
	// SessionTree returns the tree of a session (known false if the
	// node does not know the session, even after catching up).
	SessionTree(ctx context.Context, sessionID string) (tree string, known bool, err error)
	// Owns reports whether this node owns a tree.
	Owns(tree string) bool
	// CatchUp waits, bounded, until the node's store shows the log's
	// catalog tail of tree (of every tree for "").
	CatchUp(ctx context.Context, tree string)
	// Router sends requests to a tree's owner.
	Router() *cluster.Router
	// Take takes a tree nobody answers for, as failover does.
	Take(ctx context.Context, tree string) error
	// Follow makes the node follow a tree owned elsewhere for one more
	// client; leave is called when the client goes.
	Follow(ctx context.Context, tree, sessionID string) (leave func(), err error)
	// Status is the cluster's state for GET /cluster.
	Status(ctx context.Context) (protocol.ClusterStatus, error)
	// Logger is the node's logger.
	Logger() *slog.Logger
}

// maxRoutedBody bounds the body of a turn submission or cancel this
// node forwards to a tree's owner.
const maxRoutedBody = 1 << 20

// ClusterFront puts the cluster in front of the API (next): a turn
// submission or a cancel for a tree owned by another node is sent to
// its owner, and a stream (WebSocket or SSE) of such a tree follows its
// feed while it is open. Everything else, and every request about a
// tree this node owns, is the API's as in single-node mode.
func ClusterFront(next http.Handler, cn Cluster) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("POST /sessions/{id}/turns", func(w http.ResponseWriter, r *http.Request) {
		routed(cn, w, r, next, false)
	})
	mux.HandleFunc("POST /sessions/{id}/turns/{turn_id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		routed(cn, w, r, next, true)
	})
	follow := func(w http.ResponseWriter, r *http.Request) { follow(cn, w, r, next) }
	mux.HandleFunc("GET /sessions/{id}/stream", follow)
	mux.HandleFunc("GET /sessions/{id}/events", follow)
	clusterRoutes(cn, mux, next) // feedback and read-your-writes: cluster_routes.go
	return mux
}

// routed answers a submission (cancel false) or a cancel for a tree
// owned elsewhere by forwarding it to the owner. A tree nobody owns is
// taken by this node, which then answers it itself.
func routed(cn Cluster, w http.ResponseWriter, r *http.Request, next http.Handler, cancel bool) {
	tree := cn.RemoteTree(r.Context(), r.PathValue("id"))
	if tree == "" {
		next.ServeHTTP(w, r)
		return
	}
	// The body is decoded as the API decodes it, so
	// a bad one is refused as the owner would refuse it.
	body, ok := readRouted(w, r)
	if !ok {
		return
	}
	var submitBody struct {
		Content *string `json:"content"`
	}
	var cancelBody struct {
		Reason string `json:"reason"`
	}
	var into any = &submitBody
	if cancel {
		into = &cancelBody
	}
	if !decode(w, r, into, cancel) {
		return
	}
	sid := r.PathValue("id")
	var (
		status int
		result map[string]string
		err    error
	)
	if cancel {
		if len(cancelBody.Reason) > 200 {
			WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "reason is longer than 200 bytes")
			return
		}
		var rep cluster.CancelReply
		rep, err = cn.Router().Cancel(r.Context(), tree, cluster.CancelRequest{SessionID: sid, TurnID: r.PathValue("turn_id"), Reason: cancelBody.Reason})
		status, result = http.StatusAccepted, map[string]string{"turn_id": r.PathValue("turn_id"), "status": rep.Result}
	} else {
		if submitBody.Content == nil {
			WriteError(w, http.StatusBadRequest, CodeInvalidRequest, `"content" is required`)
			return
		}
		var rep cluster.SubmitReply
		rep, err = cn.Router().Submit(r.Context(), tree, cluster.SubmitRequest{SessionID: sid, Content: *submitBody.Content})
		status, result = http.StatusAccepted, map[string]string{"turn_id": rep.TurnID}
	}
	if forwardFailed(cn, w, r, next, tree, body, err) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(result)
}

// forwardFailed answers a request whose forwarding to tree's owner
// failed with err, and reports whether it did (false when err is nil).
// A tree nobody serves is taken by this node, which answers the request
// itself (body is the request's body, read for forwarding); the owner's
// error is answered as the API would have answered it there.
func forwardFailed(cn Cluster, w http.ResponseWriter, r *http.Request, next http.Handler, tree string, body []byte, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, cluster.ErrNoOwner):
		if oerr := cn.Take(r.Context(), tree); oerr == nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return true
		}
		WriteError(w, http.StatusServiceUnavailable, protocol.CodeOwnerUnavailable, "no node serves this session's tree right now; retry")
	default:
		writeRemoteError(w, cn, r, err)
	}
	return true
}

// writeRemoteError answers with the owner's error as the API would
// have answered it there.
func writeRemoteError(w http.ResponseWriter, cn Cluster, r *http.Request, err error) {
	var re *cluster.RemoteError
	if !errors.As(err, &re) {
		cn.Logger().Error("cluster: routed request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteError(w, http.StatusBadGateway, CodeInternal, "the session's owner node did not answer; see the server log")
		return
	}
	status := http.StatusInternalServerError
	switch re.Code {
	case protocol.CodeSessionNotFound, protocol.CodeTurnNotFound, protocol.CodeMessageNotFound:
		status = http.StatusNotFound
	case protocol.CodeTurnInFlight:
		status = http.StatusConflict
	case protocol.CodeInvalidRequest, "bad_request":
		status = http.StatusBadRequest
	case protocol.CodeShuttingDown:
		status = http.StatusServiceUnavailable
	}
	code := re.Code
	if code == "bad_request" {
		code = protocol.CodeInvalidRequest
	}
	if status == http.StatusInternalServerError {
		cn.Logger().Error("cluster: owner failed a routed request", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteError(w, status, CodeInternal, "internal error on the session's owner node; see its log")
		return
	}
	WriteError(w, status, code, re.Message)
}

// follow serves a stream of a session whose tree another node owns:
// the tree's feed runs while the stream is open.
func follow(cn Cluster, w http.ResponseWriter, r *http.Request, next http.Handler) {
	tree := cn.RemoteTree(r.Context(), r.PathValue("id"))
	if tree == "" {
		next.ServeHTTP(w, r)
		return
	}
	leave, err := cn.Follow(r.Context(), tree, r.PathValue("id"))
	if err != nil {
		cn.Logger().Error("cluster: follow tree", "tree", tree, "err", err)
		WriteError(w, http.StatusServiceUnavailable, protocol.CodeOwnerUnavailable, "cannot follow this session's tree from this node right now; retry")
		return
	}
	defer leave()
	next.ServeHTTP(w, r)
}
