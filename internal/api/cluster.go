package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/feed"
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
	// Forward sends a routed request (verb: a cluster.Kind's) to the
	// owner of tree and decodes its reply into out: cluster.ErrNoOwner
	// when nobody holds the tree, cluster.ErrNoAnswer when its holder
	// did not answer, or the owner's *cluster.RemoteError.
	Forward(ctx context.Context, tree, verb string, req, out any) error
	// Take takes a tree nobody owns, as failover does (cluster.ErrLeaseHeld
	// when another node took it first).
	Take(ctx context.Context, tree string) error
	// Follow makes the node follow a tree owned elsewhere for one more
	// client; leave is called when the client goes.
	Follow(ctx context.Context, tree, sessionID string) (leave func(), err error)
	// Status is the cluster's state for GET /cluster.
	Status(ctx context.Context) (protocol.ClusterStatus, error)
	// Logger is the node's logger.
	Logger() *slog.Logger
}

// maxRoutedBody bounds the body of a request this node forwards to a
// tree's owner (NATS's default maximum payload).
const maxRoutedBody = 1 << 20

// routedRequest is an API request that, for a tree owned elsewhere, is
// forwarded to the tree's owner (clusterRouted lists them).
type routedRequest struct {
	// verb is the cluster.Kind the request travels as.
	verb string
	// decode reads the request as the API's handler would (a bad one is
	// answered with the API's refusal, and ok is false) and returns what
	// to send and where the reply goes.
	decode func(w http.ResponseWriter, r *http.Request) (req, reply any, ok bool)
	// answer writes the owner's reply as the API answers the request.
	answer func(w http.ResponseWriter, r *http.Request, reply any)
	// catchUp: once the owner carried the request out, this node
	// answers only after its store caught up with the tree's log (a
	// deletion: the owner's record of it removes this node's copy of the
	// tree, which is gone by the answer).
	catchUp bool
}

// clusterRouted are the API's requests that a node forwards to the
// owner of the session's tree. Adding one is an entry here, with its
// kind in internal/cluster and the owner's handler in
// internal/clusternode's handlers.
func clusterRouted() map[string]routedRequest {
	routes := map[string]routedRequest{
		"POST /sessions/{id}/turns": {verb: cluster.KindSubmit.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				var body struct {
					Content *string `json:"content"`
				}
				if !decode(w, r, &body, false) {
					return nil, nil, false
				}
				if body.Content == nil {
					WriteError(w, http.StatusBadRequest, CodeInvalidRequest, `"content" is required`)
					return nil, nil, false
				}
				return cluster.SubmitRequest{SessionID: r.PathValue("id"), Content: *body.Content}, new(cluster.SubmitReply), true
			},
			answer: func(w http.ResponseWriter, _ *http.Request, reply any) {
				WriteJSON(w, http.StatusAccepted, map[string]string{"turn_id": reply.(*cluster.SubmitReply).TurnID})
			}},
		"POST /sessions/{id}/turns/{turn_id}/cancel": {verb: cluster.KindCancel.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				var body struct {
					Reason string `json:"reason"`
				}
				if !decode(w, r, &body, true) {
					return nil, nil, false
				}
				if len(body.Reason) > 200 {
					WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "reason is longer than 200 bytes")
					return nil, nil, false
				}
				return cluster.CancelRequest{SessionID: r.PathValue("id"), TurnID: r.PathValue("turn_id"), Reason: body.Reason},
					new(cluster.CancelReply), true
			},
			answer: func(w http.ResponseWriter, r *http.Request, reply any) {
				WriteJSON(w, http.StatusAccepted, map[string]string{"turn_id": r.PathValue("turn_id"), "status": reply.(*cluster.CancelReply).Result})
			}},
		"POST /sessions/{id}/turns/{turn_id}/feedback": {verb: cluster.KindFeedback.Verb,
			decode: func(w http.ResponseWriter, r *http.Request) (any, any, bool) {
				var body struct {
					Rating  string `json:"rating"`
					Comment string `json:"comment"`
				}
				if !decode(w, r, &body, false) {
					return nil, nil, false
				}
				return cluster.FeedbackRequest{SessionID: r.PathValue("id"), TurnID: r.PathValue("turn_id"),
					Rating: body.Rating, Comment: body.Comment}, new(cluster.FeedbackReply), true
			},
			answer: func(w http.ResponseWriter, _ *http.Request, reply any) {
				WriteJSON(w, http.StatusCreated, map[string]string{"event_id": reply.(*cluster.FeedbackReply).EventID})
			}},
	}
	maps.Copy(routes, sessionRouted())    // cluster_session.go
	maps.Copy(routes, checkpointRouted()) // cluster_checkpoint.go
	return routes
}

// ClusterFront puts the cluster in front of the API (next): a request
// of clusterRouted about a tree owned by another node is sent to its
// owner, and a stream (WebSocket or SSE) of such a tree follows its
// feed while it is open; reads first catch up with the log
// (cluster_routes.go). Everything else, and every request about a tree
// this node owns, is the API's as in single-node mode.
func ClusterFront(next http.Handler, cn Cluster) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	for pattern, rr := range clusterRouted() {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { routed(cn, rr, w, r, next) })
	}
	follow := func(w http.ResponseWriter, r *http.Request) { follow(cn, w, r, next) }
	mux.HandleFunc("GET /sessions/{id}/stream", follow)
	mux.HandleFunc("GET /sessions/{id}/events", follow)
	clusterReads(cn, mux, next) // read-your-writes: cluster_routes.go
	return mux
}

// routed answers a request about a tree owned elsewhere by forwarding
// it to the owner, with the owner's answer as its API would give it. A
// tree nobody owns is taken by this node, which then answers it itself;
// if another node took it first, the request goes to that one.
func routed(cn Cluster, rr routedRequest, w http.ResponseWriter, r *http.Request, next http.Handler) {
	tree := cn.RemoteTree(r.Context(), r.PathValue("id"))
	if tree == "" {
		next.ServeHTTP(w, r)
		return
	}
	// The body is decoded as the API decodes it, so a bad one is refused
	// as the owner would refuse it.
	body, ok := readRouted(w, r)
	if !ok {
		return
	}
	req, reply, ok := rr.decode(w, r)
	if !ok {
		return
	}
	for attempt := 0; ; attempt++ {
		err := cn.Forward(r.Context(), tree, rr.verb, req, reply)
		switch {
		case err == nil:
			if rr.catchUp {
				cn.CatchUp(r.Context(), tree)
			}
			rr.answer(w, r, reply)
			return
		case errors.Is(err, cluster.ErrNoOwner):
			terr := cn.Take(r.Context(), tree)
			if terr == nil {
				r.Body = io.NopCloser(bytes.NewReader(body))
				next.ServeHTTP(w, r)
				return
			}
			if errors.Is(terr, cluster.ErrLeaseHeld) && attempt == 0 {
				continue // another node took it meanwhile: ask that one
			}
			cn.Logger().Info("cluster: a routed request found no owner and could not take the tree", "tree", tree, "err", terr)
			WriteError(w, http.StatusServiceUnavailable, protocol.CodeOwnerUnavailable, "no node serves this session's tree right now; retry")
		case errors.Is(err, cluster.ErrNoAnswer):
			cn.Logger().Info("cluster: the owner of a tree did not answer a routed request", "tree", tree, "method", r.Method, "path", r.URL.Path)
			WriteError(w, http.StatusServiceUnavailable, protocol.CodeOwnerUnavailable, "the node that runs this session's tree did not answer; retry")
		default:
			writeRemoteError(w, cn, r, err)
		}
		return
	}
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
	status := remoteStatus(re.Code)
	code := re.Code
	if code == "bad_request" {
		code = protocol.CodeInvalidRequest
	}
	if status == 0 {
		cn.Logger().Error("cluster: owner failed a routed request", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteError(w, http.StatusInternalServerError, CodeInternal, "internal error on the session's owner node; see its log")
		return
	}
	if code == protocol.CodeApprovalResolved {
		// The resolution that won, beside the error, as the owner's API
		// writes it.
		var res protocol.ApprovalResolution
		if json.Unmarshal(re.Detail, &res) == nil && res.ApprovalID != "" {
			WriteJSON(w, status, protocol.ApprovalConflict{Error: protocol.HTTPErrorDetail{Code: code, Message: re.Message}, Resolution: res})
			return
		}
		cn.Logger().Warn("cluster: the owner's approval_resolved came without its resolution", "path", r.URL.Path)
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
		cn.Logger().Warn("cluster: follow tree", "tree", tree, "err", err)
		WriteError(w, http.StatusServiceUnavailable, protocol.CodeOwnerUnavailable, "cannot follow this session's tree from this node right now; retry")
		return
	}
	// The follow lasts as long as the stream: a WebSocket, which runs
	// on after its handler returned, takes the hold and leaves when
	// its connection ends; an SSE stream ends with its handler.
	ctx, hold := feed.WithHold(r.Context())
	hold.Add(leave)
	defer hold.ReleaseUnlessTaken()
	next.ServeHTTP(w, r.WithContext(ctx))
}
