package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/protocol"
)

// maxRoutedBody bounds the body of a turn submission or cancel this
// node forwards to a tree's owner.
const maxRoutedBody = 1 << 20

// wrap puts the cluster in front of the API: a turn submission or a
// cancel for a tree owned by another node is sent to its owner, and a
// stream (WebSocket or SSE) of such a tree follows its feed while it
// is open. Everything else, and every request about a tree this node
// owns, is the API's as in single-node mode.
func (cn *clusterNode) wrap(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("POST /sessions/{id}/turns", func(w http.ResponseWriter, r *http.Request) {
		cn.routed(w, r, next, false)
	})
	mux.HandleFunc("POST /sessions/{id}/turns/{turn_id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		cn.routed(w, r, next, true)
	})
	follow := func(w http.ResponseWriter, r *http.Request) { cn.follow(w, r, next) }
	mux.HandleFunc("GET /sessions/{id}/stream", follow)
	mux.HandleFunc("GET /sessions/{id}/events", follow)
	cn.routes(mux, next) // feedback and read-your-writes: cluster_routes.go
	return mux
}

// remoteTree returns the tree of the request's session if another node
// owns it (or nobody does); "" when this node owns it or the session
// is unknown here (the API answers then).
func (cn *clusterNode) remoteTree(r *http.Request) string {
	tree, known, err := cn.treeOfRequest(r) // cluster_routes.go
	if err != nil || !known || cn.owns(tree) {
		return ""
	}
	return tree
}

// routed answers a submission (cancel false) or a cancel for a tree
// owned elsewhere by forwarding it to the owner. A tree nobody owns is
// taken by this node, which then answers it itself.
func (cn *clusterNode) routed(w http.ResponseWriter, r *http.Request, next http.Handler, cancel bool) {
	tree := cn.remoteTree(r)
	if tree == "" {
		next.ServeHTTP(w, r)
		return
	}
	// The body is decoded as the API decodes it (cluster_routes.go), so
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
	if !api.Decode(w, r, into, cancel) {
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
			api.WriteError(w, http.StatusBadRequest, api.CodeInvalidRequest, "reason is longer than 200 bytes")
			return
		}
		var rep cluster.CancelReply
		rep, err = cn.router.Cancel(r.Context(), tree, cluster.CancelRequest{SessionID: sid, TurnID: r.PathValue("turn_id"), Reason: cancelBody.Reason})
		status, result = http.StatusAccepted, map[string]string{"turn_id": r.PathValue("turn_id"), "status": rep.Result}
	} else {
		if submitBody.Content == nil {
			api.WriteError(w, http.StatusBadRequest, api.CodeInvalidRequest, `"content" is required`)
			return
		}
		var rep cluster.SubmitReply
		rep, err = cn.router.Submit(r.Context(), tree, cluster.SubmitRequest{SessionID: sid, Content: *submitBody.Content})
		status, result = http.StatusAccepted, map[string]string{"turn_id": rep.TurnID}
	}
	if cn.forwardFailed(w, r, next, tree, body, err) {
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
func (cn *clusterNode) forwardFailed(w http.ResponseWriter, r *http.Request, next http.Handler, tree string, body []byte, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, cluster.ErrNoOwner):
		if _, oerr := cn.take(r.Context(), tree); oerr == nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return true
		}
		api.WriteError(w, http.StatusServiceUnavailable, protocol.CodeOwnerUnavailable, "no node serves this session's tree right now; retry")
	default:
		writeRemoteError(w, cn, r, err)
	}
	return true
}

// writeRemoteError answers with the owner's error as the API would
// have answered it there.
func writeRemoteError(w http.ResponseWriter, cn *clusterNode, r *http.Request, err error) {
	var re *cluster.RemoteError
	if !errors.As(err, &re) {
		cn.logger.Error("cluster: routed request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		api.WriteError(w, http.StatusBadGateway, api.CodeInternal, "the session's owner node did not answer; see the server log")
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
		cn.logger.Error("cluster: owner failed a routed request", "method", r.Method, "path", r.URL.Path, "err", err)
		api.WriteError(w, status, api.CodeInternal, "internal error on the session's owner node; see its log")
		return
	}
	api.WriteError(w, status, code, re.Message)
}

// follow serves a stream of a session whose tree another node owns:
// the tree's feed runs while the stream is open.
func (cn *clusterNode) follow(w http.ResponseWriter, r *http.Request, next http.Handler) {
	tree := cn.remoteTree(r)
	if tree == "" {
		next.ServeHTTP(w, r)
		return
	}
	leave, err := cn.attach(r.Context(), tree, r.PathValue("id"))
	if err != nil {
		cn.logger.Error("cluster: follow tree", "tree", tree, "err", err)
		api.WriteError(w, http.StatusServiceUnavailable, protocol.CodeOwnerUnavailable, "cannot follow this session's tree from this node right now; retry")
		return
	}
	defer leave()
	next.ServeHTTP(w, r)
}
