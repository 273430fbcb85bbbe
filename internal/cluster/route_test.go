package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
)

// turns is a stand-in for the owner's session manager: one turn per
// session, cancels idempotent, every call recorded with the node that
// served it.
type turns struct {
	node string
	mu   sync.Mutex
	turn map[string]string // session -> in-flight turn
	done map[string]bool   // turn -> cancelled
	log  []string
}

func newTurns(node string) *turns {
	return &turns{node: node, turn: map[string]string{}, done: map[string]bool{}}
}

func (h *turns) Submit(_ context.Context, tree string, req cluster.SubmitRequest) (cluster.SubmitReply, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, "submit "+req.SessionID)
	if _, ok := h.turn[req.SessionID]; ok {
		return cluster.SubmitReply{}, &cluster.RemoteError{Code: "turn_in_flight", Message: "a turn is running"}
	}
	id := fmt.Sprintf("turn_%s_%d", h.node, len(h.log))
	h.turn[req.SessionID] = id
	return cluster.SubmitReply{TurnID: id}, nil
}

func (h *turns) Cancel(_ context.Context, tree string, req cluster.CancelRequest) (cluster.CancelReply, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, "cancel "+req.TurnID+" "+req.Reason)
	switch {
	case h.done[req.TurnID]:
		return cluster.CancelReply{Result: "already_cancelling"}, nil
	case h.turn[req.SessionID] == req.TurnID:
		h.done[req.TurnID] = true
		return cluster.CancelReply{Result: "cancelling"}, nil
	}
	return cluster.CancelReply{}, &cluster.RemoteError{Code: "turn_not_found", Message: req.TurnID}
}

func (h *turns) Feedback(_ context.Context, tree string, req cluster.FeedbackRequest) (cluster.FeedbackReply, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, "feedback "+req.TurnID+" "+req.Rating+" "+req.Comment)
	if req.Rating != "up" && req.Rating != "down" {
		return cluster.FeedbackReply{}, &cluster.RemoteError{Code: "invalid_request", Message: `rating must be "up" or "down"`}
	}
	return cluster.FeedbackReply{EventID: fmt.Sprintf("evt_%s_%d", h.node, len(h.log))}, nil
}

func (h *turns) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.log...)
}

func TestRequestsFromAnyNodeReachTheOwner(t *testing.T) {
	s := startServer(t)
	cfg := cluster.LeaseConfig{TTL: time.Minute}
	a, b, c := newNode(t, s, "node-a", cfg), newNode(t, s, "node-b", cfg), newNode(t, s, "node-c", cfg)
	tree := newSessionID()

	owner := newTurns("node-a")
	oa, serving := a.serve(t, tree, owner)

	sub, err := b.router.Submit(ctx(t), tree, cluster.SubmitRequest{SessionID: tree, Content: "hello"})
	if err != nil {
		t.Fatalf("submit via node-b: %v", err)
	}
	_, err = c.router.Submit(ctx(t), tree, cluster.SubmitRequest{SessionID: tree, Content: "again"})
	var re *cluster.RemoteError
	if !errors.As(err, &re) || re.Code != "turn_in_flight" {
		t.Fatalf("second submit via node-c: %v, want turn_in_flight", err)
	}

	// Cancel through a node that does not own the tree, then again
	// through another: the first cancels, the second is idempotent.
	r1, err := b.router.Cancel(ctx(t), tree, cluster.CancelRequest{SessionID: tree, TurnID: sub.TurnID, Reason: "user_cancel"})
	if err != nil || r1.Result != "cancelling" {
		t.Fatalf("cancel via node-b = %+v, %v; want cancelling", r1, err)
	}
	r2, err := c.router.Cancel(ctx(t), tree, cluster.CancelRequest{SessionID: tree, TurnID: sub.TurnID})
	if err != nil || r2.Result != "already_cancelling" {
		t.Fatalf("cancel via node-c = %+v, %v; want already_cancelling", r2, err)
	}
	want := []string{"submit " + tree, "submit " + tree, "cancel " + sub.TurnID + " user_cancel", "cancel " + sub.TurnID + " "}
	if got := owner.calls(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("owner served %q, want %q", got, want)
	}

	// The owner lets the tree go: nobody answers for it any more.
	if err := oa.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	serving.Stop()
	if _, err := b.router.Cancel(ctx(t), tree, cluster.CancelRequest{SessionID: tree, TurnID: sub.TurnID}); !errors.Is(err, cluster.ErrNoOwner) {
		t.Fatalf("cancel with no owner: %v, want ErrNoOwner", err)
	}

	// node-c takes the tree over; requests follow it.
	oc := c.own(t, tree)
	next := newTurns("node-c")
	sc, err := c.router.Serve(oc.Context(), tree, cluster.HandlersOf(next))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)
	if _, err := a.router.Submit(ctx(t), tree, cluster.SubmitRequest{SessionID: tree, Content: "hi"}); err != nil {
		t.Fatalf("submit to the new owner: %v", err)
	}
	if got := next.calls(); len(got) != 1 {
		t.Fatalf("new owner served %q, want one submit", got)
	}
}

func TestOwnerThatLostTheTreeStopsAnswering(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Minute})
	b := newNode(t, s, "node-b", cluster.LeaseConfig{TTL: time.Minute})
	tree := newSessionID()
	oa, _ := a.serve(t, tree, newTurns("node-a"))
	oa.Lease().Lose(cluster.ErrLeaseLost)
	// The subscription goes once the owner's context is done.
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A request in flight while the subscription goes may get no
		// answer at all: each attempt has its own short deadline.
		attempt, cancel := context.WithTimeout(ctx(t), time.Second)
		_, err := b.router.Submit(attempt, tree, cluster.SubmitRequest{SessionID: tree, Content: "x"})
		cancel()
		if errors.Is(err, cluster.ErrNoOwner) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a node that lost the tree still answers: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBadRequestsGetAnErrorReply: a malformed request of any kind, or
// one to an unknown subject, is answered with bad_request and never
// reaches the handler.
func TestBadRequestsGetAnErrorReply(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Minute})
	tree := newSessionID()
	owner := newTurns("node-a")
	a.serve(t, tree, owner)
	nc := connect(t, s)
	rpc := "metis.rpc." + tree + "."
	for _, c := range []struct{ subject, body string }{
		{rpc + "cancel", `not json`},
		{rpc + "submit", `{"session_id":"a.b","content":"x"}`},
		{rpc + "reboot", `{}`},
		{rpc + "feedback", `not json`},
		{rpc + "feedback", `{"session_id":"a.b","turn_id":"t","rating":"up"}`},
		{rpc + "feedback", `{"session_id":"` + tree + `","turn_id":"","rating":"up"}`},
		{rpc + "feedback", `{"session_id":"` + tree + `","turn_id":"t","rating":7}`},
	} {
		subject, body := c.subject, c.body
		m, err := nc.Request(subject, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		var rep struct {
			Error *cluster.RemoteError `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &rep); err != nil || rep.Error == nil || rep.Error.Code != "bad_request" {
			t.Errorf("%s %s: reply %s, want a bad_request error", subject, body, m.Data)
		}
	}
	if got := owner.calls(); len(got) != 0 {
		t.Fatalf("bad requests reached the handler: %q", got)
	}
}

func FuzzDecodeCancelRequest(f *testing.F) {
	f.Add([]byte(`{"session_id":"sess_1","turn_id":"turn_1","reason":"user_cancel"}`))
	f.Add([]byte(`{"session_id":"a.b","turn_id":""}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := cluster.DecodeCancelRequest(b)
		if err != nil {
			if !isBadRequest(err) {
				t.Fatalf("error %v is not a bad_request", err)
			}
			return
		}
		if cluster.ValidToken(r.SessionID) != nil || r.TurnID == "" {
			t.Fatalf("accepted %+v", r)
		}
	})
}

// isBadRequest reports whether err is the owner's bad_request refusal.
func isBadRequest(err error) bool {
	var re *cluster.RemoteError
	return errors.As(err, &re) && re.Code == "bad_request"
}
