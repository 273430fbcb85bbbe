package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Request/reply subjects that reach a tree's owner from any node:
// metis.rpc.<tree>.submit, metis.rpc.<tree>.cancel,
// metis.rpc.<tree>.feedback and metis.rpc.<tree>.meta, and those about a
// session's running state (route_session.go). Only the owner subscribes
// to them, while it holds the tree.
const (
	rpcPrefix   = "metis.rpc."
	rpcSubmit   = "submit"
	rpcCancel   = "cancel"
	rpcFeedback = "feedback"
	rpcMeta     = "meta" // route_meta.go
)

// Kinds of routed request, as Router.Observe reports them.
const (
	RouteSubmit   = rpcSubmit
	RouteCancel   = rpcCancel
	RouteFeedback = rpcFeedback
	RouteMeta     = rpcMeta
)

// Results of a routed request, as Router.Observe reports them.
const (
	// RouteOK: the owner answered with a result.
	RouteOK = "ok"
	// RouteRefused: the owner answered with an error (turn_in_flight,
	// turn_not_found, ...): the request reached it.
	RouteRefused = "refused"
	// RouteNoOwner: no node serves the tree (ErrNoOwner).
	RouteNoOwner = "no_owner"
	// RouteFailed: no answer came (a timeout, a lost connection, a bad
	// reply).
	RouteFailed = "failed"
)

func rpcSubject(tree, verb string) string { return rpcPrefix + tree + "." + verb }

// SubmitRequest asks the owner to start a turn on a session of its tree.
type SubmitRequest struct {
	SessionID string `json:"session_id"`
	Content   string `json:"content"`
}

// SubmitReply answers a SubmitRequest.
type SubmitReply struct {
	TurnID string `json:"turn_id"`
}

// CancelRequest asks the owner to cancel a turn. Cancels are idempotent:
// the owner answers a repeated one as the session manager does
// (already_cancelling, already_ended).
type CancelRequest struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	Reason    string `json:"reason,omitempty"`
}

// CancelReply answers a CancelRequest.
type CancelReply struct {
	Result string `json:"result"`
}

// FeedbackRequest asks the owner to record a user's rating of a turn.
// The owner's session manager checks rating and comment, so a refusal
// reads as it would on the owner.
type FeedbackRequest struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	Rating    string `json:"rating"`
	Comment   string `json:"comment,omitempty"`
}

// FeedbackReply answers a FeedbackRequest: the id of the
// feedback.submitted event the owner committed.
type FeedbackReply struct {
	EventID string `json:"event_id"`
}

// RemoteError is an error the owner answered with. Handlers return one
// to pass a code (for example turn_in_flight, session_not_found) to the
// node that asked; any other handler error reaches it as code internal.
// Detail, when set, is what the owner's API writes beside the error
// (for CodeApprovalResolved, the resolution that won), so the node that
// asked answers exactly as the owner would.
type RemoteError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

func (e *RemoteError) Error() string { return "cluster: owner answered " + e.Code + ": " + e.Message }

// ErrNoOwner is wrapped when no node serves a tree's requests: nobody
// holds it, its owner just died and its lease has not expired yet, or
// the node that answered has just lost it. The caller may retry.
var ErrNoOwner = errors.New("cluster: no owner serves the tree")

// ErrNoAnswer is wrapped when a node serves a tree's requests but did
// not answer in time: it is paused, overloaded or cut off. The caller
// may retry; the tree's lease decides when another node takes over.
var ErrNoAnswer = errors.New("cluster: the tree's owner did not answer in time")

// codeNotOwner is the answer of a node that lost the tree while a
// request was on its way.
const codeNotOwner = "not_owner"

// NotOwnerError is the answer of a handler whose node lost the tree
// (or could not get it ready) while a request waited: the node that
// asked gets ErrNoOwner, and may retry.
func NotOwnerError() error {
	return &RemoteError{Code: codeNotOwner, Message: "this node no longer owns the tree"}
}

// Handler is the owner's side of the four built-in kinds of routed
// request: the session manager of the node that owns the tree. Serve
// takes a Handlers table; HandlersOf makes one from a Handler.
type Handler interface {
	Submit(ctx context.Context, tree string, req SubmitRequest) (SubmitReply, error)
	Cancel(ctx context.Context, tree string, req CancelRequest) (CancelReply, error)
	Feedback(ctx context.Context, tree string, req FeedbackRequest) (FeedbackReply, error)
	Meta(ctx context.Context, tree string, req MetaRequest) (MetaReply, error)
}

// Kind is one kind of routed request: the verb of its subject
// (metis.rpc.<tree>.<verb>) and the owner's decoder of its body, which
// refuses a malformed request (a *RemoteError, code bad_request) before
// any handler sees it.
//
// Adding a kind of routed request takes a request and a reply type, a
// decoder, a Kind here, the owner's handler in its Handlers
// (internal/clusternode) and, for an HTTP request, the route of
// internal/api's cluster front.
type Kind[Req any] struct {
	Verb   string
	Decode func([]byte) (Req, error)
}

// The kinds of routed request.
var (
	KindSubmit   = Kind[SubmitRequest]{rpcSubmit, DecodeSubmitRequest}
	KindCancel   = Kind[CancelRequest]{rpcCancel, DecodeCancelRequest}
	KindFeedback = Kind[FeedbackRequest]{rpcFeedback, DecodeFeedbackRequest}
	KindMeta     = Kind[MetaRequest]{rpcMeta, DecodeMetaRequest}
)

// Handlers is the owner's side of routed requests: an answer per verb,
// taking the request's body (see Handle).
type Handlers map[string]func(ctx context.Context, tree string, body []byte) (any, error)

// Handle sets the handler of kind k in hs: the body is decoded with k's
// decoder (a bad one is answered bad_request), then f answers.
func Handle[Req, Rep any](hs Handlers, k Kind[Req], f func(ctx context.Context, tree string, req Req) (Rep, error)) {
	hs[k.Verb] = func(ctx context.Context, tree string, body []byte) (any, error) {
		req, err := k.Decode(body)
		if err != nil {
			return nil, err
		}
		return f(ctx, tree, req)
	}
}

// HandlersOf returns the table of the four built-in kinds answered by h.
func HandlersOf(h Handler) Handlers {
	hs := Handlers{}
	Handle(hs, KindSubmit, h.Submit)
	Handle(hs, KindCancel, h.Cancel)
	Handle(hs, KindFeedback, h.Feedback)
	Handle(hs, KindMeta, h.Meta)
	return hs
}

// reply is the body of every answer: a result or an error.
type reply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RemoteError    `json:"error,omitempty"`
}

// maxRequest bounds a request body.
const maxRequest = 1 << 20

// DecodeSubmitRequest decodes and checks a submit request body.
func DecodeSubmitRequest(b []byte) (SubmitRequest, error) {
	var r SubmitRequest
	if err := decodeRequest(b, &r); err != nil {
		return r, err
	}
	if err := ValidToken(r.SessionID); err != nil {
		return r, &RemoteError{Code: "bad_request", Message: "session_id: " + err.Error()}
	}
	if r.Content == "" {
		return r, &RemoteError{Code: "bad_request", Message: "empty content"}
	}
	return r, nil
}

// DecodeCancelRequest decodes and checks a cancel request body.
func DecodeCancelRequest(b []byte) (CancelRequest, error) {
	return decodeTurnRequest[CancelRequest](b)
}

// DecodeFeedbackRequest decodes and checks a feedback request body. The
// rating and comment are the owner's session manager's to judge.
func DecodeFeedbackRequest(b []byte) (FeedbackRequest, error) {
	return decodeTurnRequest[FeedbackRequest](b)
}

func (r CancelRequest) turn() (session, turn string)   { return r.SessionID, r.TurnID }
func (r FeedbackRequest) turn() (session, turn string) { return r.SessionID, r.TurnID }

// decodeTurnRequest decodes a request about one turn of a session and
// checks that it names both.
func decodeTurnRequest[T interface{ turn() (string, string) }](b []byte) (T, error) {
	var r T
	if err := decodeRequest(b, &r); err != nil {
		return r, err
	}
	session, turn := r.turn()
	if err := ValidToken(session); err != nil {
		return r, &RemoteError{Code: "bad_request", Message: "session_id: " + err.Error()}
	}
	if turn == "" {
		return r, &RemoteError{Code: "bad_request", Message: "empty turn_id"}
	}
	return r, nil
}

func decodeRequest(b []byte, v any) error {
	if len(b) > maxRequest {
		return &RemoteError{Code: "bad_request", Message: fmt.Sprintf("request of %d bytes", len(b))}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &RemoteError{Code: "bad_request", Message: err.Error()}
	}
	return nil
}

// Router sends requests to trees' owners and serves the trees this node
// owns.
type Router struct {
	nc      *nats.Conn
	timeout time.Duration
	log     *slog.Logger
	observe func(kind, result string)
}

// NewRouter returns a router on nc. timeout bounds one request when the
// caller's context has no earlier deadline (default 10s).
func NewRouter(nc *nats.Conn, timeout time.Duration, log *slog.Logger) *Router {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &Router{nc: nc, timeout: timeout, log: log}
}

// Observe sets a function told the kind (RouteSubmit, RouteCancel,
// RouteFeedback, RouteMeta, RouteApprove, RoutePatch, RouteCompact,
// RouteMCP, RouteDelete, RouteTurns, RouteTurnChanges, RouteRevert, RouteRestore,
// RouteFork) and result (RouteOK, RouteRefused, RouteNoOwner,
// RouteFailed) of every request this router sends: the node's metrics.
// Call it before the first request.
func (r *Router) Observe(f func(kind, result string)) { r.observe = f }

// Submit sends a turn submission to tree's owner.
func (r *Router) Submit(ctx context.Context, tree string, req SubmitRequest) (SubmitReply, error) {
	var out SubmitReply
	err := r.Call(ctx, tree, rpcSubmit, req, &out)
	return out, err
}

// Cancel sends a cancel to tree's owner.
func (r *Router) Cancel(ctx context.Context, tree string, req CancelRequest) (CancelReply, error) {
	var out CancelReply
	err := r.Call(ctx, tree, rpcCancel, req, &out)
	return out, err
}

// Feedback sends a turn's feedback to tree's owner.
func (r *Router) Feedback(ctx context.Context, tree string, req FeedbackRequest) (FeedbackReply, error) {
	var out FeedbackReply
	err := r.Call(ctx, tree, rpcFeedback, req, &out)
	return out, err
}

// Call sends a request of the kind named verb (a Kind's Verb) to tree's
// owner and decodes its reply into out. It fails with ErrNoOwner when
// no node serves the tree, ErrNoAnswer when none answered in time, and
// the owner's *RemoteError when it refused the request.
func (r *Router) Call(ctx context.Context, tree, verb string, req, out any) error {
	err := r.send(ctx, tree, verb, req, out)
	if r.observe != nil {
		r.observe(verb, routeResult(err))
	}
	return err
}

// routeResult classifies a request's outcome for Observe.
func routeResult(err error) string {
	var re *RemoteError
	switch {
	case err == nil:
		return RouteOK
	case errors.Is(err, ErrNoOwner):
		return RouteNoOwner
	case errors.As(err, &re):
		return RouteRefused
	}
	return RouteFailed
}

func (r *Router) send(ctx context.Context, tree, verb string, req, out any) error {
	if err := ValidToken(tree); err != nil {
		return err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("cluster: %s to %s: %w", verb, tree, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	m, err := r.nc.RequestWithContext(ctx, rpcSubject(tree, verb), body)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("%w: %s", ErrNoOwner, tree)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("%w: %s to %s: %w", ErrNoAnswer, verb, tree, err)
		}
		return fmt.Errorf("cluster: %s to %s: %w", verb, tree, err)
	}
	var rep reply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return fmt.Errorf("cluster: %s to %s: bad reply: %w", verb, tree, err)
	}
	if rep.Error != nil {
		if rep.Error.Code == codeNotOwner {
			return fmt.Errorf("%w: %s: %w", ErrNoOwner, tree, rep.Error)
		}
		return rep.Error
	}
	if err := json.Unmarshal(rep.Result, out); err != nil {
		return fmt.Errorf("cluster: %s to %s: bad reply: %w", verb, tree, err)
	}
	return nil
}

// Serving is a tree's request subscription on its owner.
type Serving struct {
	sub  *nats.Subscription
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

// Serve answers tree's requests with hs until ctx is done (the owner's
// context: a node that loses the tree stops answering for it) or Stop is
// called. Each request's handler runs with a context derived from ctx.
func (r *Router) Serve(ctx context.Context, tree string, hs Handlers) (*Serving, error) {
	if err := ValidToken(tree); err != nil {
		return nil, err
	}
	sub, err := r.nc.Subscribe(rpcPrefix+tree+".*", func(m *nats.Msg) { r.answer(ctx, tree, hs, m) })
	if err != nil {
		return nil, fmt.Errorf("cluster: serve %s: %w", tree, err)
	}
	// Make sure the server has the subscription before anyone is told
	// this node owns the tree.
	fctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("cluster: serve %s: %w", tree, err)
	}
	s := &Serving{sub: sub, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		select {
		case <-ctx.Done():
		case <-s.stop:
		}
		// Unsubscribe and flush, so that once Stop returns the server no
		// longer routes the tree's requests here.
		err := sub.Unsubscribe()
		if err == nil {
			err = r.nc.FlushTimeout(r.timeout)
		}
		if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			r.log.Warn("cluster: stop serving", "tree", tree, "err", err)
		}
	}()
	return s, nil
}

// Stop stops answering and waits until the subscription is gone.
func (s *Serving) Stop() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

func (r *Router) answer(ctx context.Context, tree string, hs Handlers, m *nats.Msg) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var (
		result any
		err    error
	)
	verb := m.Subject[len(rpcPrefix)+len(tree)+1:]
	switch h := hs[verb]; {
	case ctx.Err() != nil:
		// No longer the owner (the subscription is on its way out).
		err = &RemoteError{Code: codeNotOwner, Message: "this node no longer owns the tree"}
	case h == nil:
		err = &RemoteError{Code: "bad_request", Message: "unknown request " + verb}
	default:
		result, err = h(ctx, tree, m.Data)
	}
	var rep reply
	if err != nil {
		var re *RemoteError
		if !errors.As(err, &re) {
			r.log.Error("cluster: routed request failed", "tree", tree, "subject", m.Subject, "err", err)
			re = &RemoteError{Code: "internal", Message: err.Error()}
		}
		rep.Error = re
	} else if rep.Result, err = json.Marshal(result); err != nil {
		rep.Error = &RemoteError{Code: "internal", Message: err.Error()}
	}
	b, _ := json.Marshal(rep) // cannot fail: strings and raw JSON
	if err := m.Respond(b); err != nil {
		r.log.Warn("cluster: reply", "tree", tree, "err", err)
	}
}
