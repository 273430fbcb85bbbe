package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/protocol"
)

// approvals is a stand-in for the owner's session manager's approval
// requests: the first answer wins, a later one is refused with the
// winner in the refusal's Detail.
type approvals struct {
	mu  sync.Mutex
	won map[string]protocol.ApprovalResolution
	log []string
}

func (h *approvals) approve(_ context.Context, _ string, req cluster.ApproveRequest) (protocol.ApprovalResolution, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, "approve "+req.ApprovalID+" "+req.Decision)
	if res, ok := h.won[req.ApprovalID]; ok {
		detail, err := json.Marshal(res)
		if err != nil {
			return res, err
		}
		return res, &cluster.RemoteError{Code: cluster.CodeApprovalResolved, Message: "decided already", Detail: detail}
	}
	res := protocol.ApprovalResolution{ApprovalID: req.ApprovalID, SessionID: req.SessionID, Decision: req.Decision, Reason: "user", Scope: req.Scope}
	h.won[req.ApprovalID] = res
	return res, nil
}

func (h *approvals) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.log)
}

// serveSessionKinds serves the routed requests about a session's
// running state on tree from node n, answering approvals with h and
// the others with a fixed reply.
func serveSessionKinds(t *testing.T, n *node, tree string, h *approvals) *cluster.Serving {
	t.Helper()
	o := n.own(t, tree)
	hs := cluster.Handlers{}
	cluster.Handle(hs, cluster.KindApprove, h.approve)
	cluster.Handle(hs, cluster.KindPatch, func(_ context.Context, _ string, req cluster.PatchRequest) (protocol.SessionSummary, error) {
		if req.Mode != nil && *req.Mode == "reckless" {
			return protocol.SessionSummary{}, &cluster.RemoteError{Code: protocol.CodeInvalidMode, Message: "invalid mode"}
		}
		return protocol.SessionSummary{ID: req.SessionID, Mode: *req.Mode}, nil
	})
	cluster.Handle(hs, cluster.KindCompact, func(_ context.Context, _ string, req cluster.CompactRequest) (protocol.CompactAccepted, error) {
		return protocol.CompactAccepted{CompactionID: "cmp_" + req.Instructions}, nil
	})
	cluster.Handle(hs, cluster.KindMCP, func(_ context.Context, _ string, req cluster.MCPServersRequest) (protocol.MCPStatus, error) {
		st := protocol.MCPStatus{Servers: []protocol.MCPServerStatus{}}
		for _, s := range req.Servers {
			st.Servers = append(st.Servers, protocol.MCPServerStatus{Name: s.Name})
		}
		return st, nil
	})
	serving, err := n.router.Serve(o.Context(), tree, hs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(serving.Stop)
	return serving
}

// TestSessionStateRequestsReachTheOwner: an approval's answer, a patch,
// a compaction and a session's MCP servers sent from a node that does
// not own the tree reach the owner's handlers; a second answer is
// refused with the owner's approval_resolved and the winning
// resolution in its Detail, and the router reports each kind.
func TestSessionStateRequestsReachTheOwner(t *testing.T) {
	s := startServer(t)
	cfg := cluster.LeaseConfig{TTL: time.Minute}
	a, b := newNode(t, s, "node-a", cfg), newNode(t, s, "node-b", cfg)
	var seen observed
	b.router.Observe(seen.add)
	tree := newSessionID()
	owner := &approvals{won: map[string]protocol.ApprovalResolution{}}
	serveSessionKinds(t, a, tree, owner)

	var won protocol.ApprovalResolution
	allow := cluster.ApproveRequest{SessionID: tree, ApprovalID: "apr_1", ApprovalAnswer: protocol.ApprovalAnswer{Decision: "allow", Scope: "session"}}
	if err := b.router.Call(ctx(t), tree, cluster.KindApprove.Verb, allow, &won); err != nil || won.Decision != "allow" || won.Scope != "session" {
		t.Fatalf("approve via node-b = %+v, %v", won, err)
	}
	deny := cluster.ApproveRequest{SessionID: tree, ApprovalID: "apr_1", ApprovalAnswer: protocol.ApprovalAnswer{Decision: "deny"}}
	var again protocol.ApprovalResolution
	err := b.router.Call(ctx(t), tree, cluster.KindApprove.Verb, deny, &again)
	var re *cluster.RemoteError
	if !errors.As(err, &re) || re.Code != protocol.CodeApprovalResolved {
		t.Fatalf("second answer via node-b: %v, want approval_resolved", err)
	}
	var inDetail protocol.ApprovalResolution
	if err := json.Unmarshal(re.Detail, &inDetail); err != nil || !reflect.DeepEqual(inDetail, won) {
		t.Fatalf("the refusal's detail %s (%v), want the winner %+v", re.Detail, err, won)
	}

	mode := "plan"
	var sum protocol.SessionSummary
	if err := b.router.Call(ctx(t), tree, cluster.KindPatch.Verb, cluster.PatchRequest{SessionID: tree, Mode: &mode}, &sum); err != nil || sum.Mode != "plan" {
		t.Fatalf("patch via node-b = %+v, %v", sum, err)
	}
	bad := "reckless"
	if err := b.router.Call(ctx(t), tree, cluster.KindPatch.Verb, cluster.PatchRequest{SessionID: tree, Mode: &bad}, &sum); !errors.As(err, &re) || re.Code != protocol.CodeInvalidMode {
		t.Fatalf("bad patch via node-b: %v, want invalid_mode", err)
	}
	var acc protocol.CompactAccepted
	if err := b.router.Call(ctx(t), tree, cluster.KindCompact.Verb, cluster.CompactRequest{SessionID: tree, Instructions: "x"}, &acc); err != nil || acc.CompactionID != "cmp_x" {
		t.Fatalf("compact via node-b = %+v, %v", acc, err)
	}
	var st protocol.MCPStatus
	set := cluster.MCPServersRequest{SessionID: tree, Set: true, Servers: []protocol.MCPServerConfig{{Name: "notes", Command: "true"}}}
	if err := b.router.Call(ctx(t), tree, cluster.KindMCP.Verb, set, &st); err != nil || len(st.Servers) != 1 || st.Servers[0].Name != "notes" {
		t.Fatalf("mcp servers via node-b = %+v, %v", st, err)
	}

	if got, want := owner.calls(), []string{"approve apr_1 allow", "approve apr_1 deny"}; !slices.Equal(got, want) {
		t.Fatalf("owner served %q, want %q", got, want)
	}
	wantSeen := []string{"approve ok", "approve refused", "patch ok", "patch refused", "compact ok", "mcp_servers ok"}
	if got := seen.list(); !slices.Equal(got, wantSeen) {
		t.Fatalf("observed %q, want %q", got, wantSeen)
	}
}

// TestBadSessionStateRequestsGetAnErrorReply: a malformed request of
// each kind about a session's running state is answered with
// bad_request and never reaches the handler.
func TestBadSessionStateRequestsGetAnErrorReply(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "node-a", cluster.LeaseConfig{TTL: time.Minute})
	tree := newSessionID()
	owner := &approvals{won: map[string]protocol.ApprovalResolution{}}
	serveSessionKinds(t, a, tree, owner)
	nc := connect(t, s)
	rpc := "metis.rpc." + tree + "."
	badRequests(t, nc, []struct{ subject, body string }{
		{rpc + "approve", `not json`},
		{rpc + "approve", `{"session_id":"a.b","approval_id":"apr_1","decision":"allow"}`},
		{rpc + "approve", `{"session_id":"` + tree + `","approval_id":"","decision":"allow"}`},
		{rpc + "approve", `{"session_id":"` + tree + `","approval_id":"apr_1","decision":5}`},
		{rpc + "patch", `{"session_id":"` + tree + `"}`},
		{rpc + "patch", `{"session_id":"_owner","mode":"plan"}`},
		{rpc + "patch", `{"session_id":"` + tree + `","max_turn_cost_usd":"1"}`},
		{rpc + "compact", `{"session_id":"a*b"}`},
		{rpc + "compact", `[]`},
		{rpc + "mcp_servers", `{"session_id":"` + tree + `","servers":[{"name":"x"}]}`},
		{rpc + "mcp_servers", `{"session_id":"","set":true}`},
	})
	if got := owner.calls(); len(got) != 0 {
		t.Fatalf("bad requests reached the handler: %q", got)
	}
}

// badRequests sends each malformed request and checks it is answered
// with a bad_request error.
func badRequests(t *testing.T, nc *nats.Conn, cases []struct{ subject, body string }) {
	t.Helper()
	for _, c := range cases {
		m, err := nc.Request(c.subject, []byte(c.body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.subject, err)
		}
		var rep struct {
			Error *cluster.RemoteError `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &rep); err != nil || rep.Error == nil || rep.Error.Code != "bad_request" {
			t.Errorf("%s %s: reply %s, want a bad_request error", c.subject, c.body, m.Data)
		}
	}
}

// fuzzDecoder fuzzes a request decoder: it refuses with bad_request
// only, and what it accepts names a valid session and encodes again.
func fuzzDecoder[R any](f *testing.F, decode func([]byte) (R, error), check func(R) bool, seeds ...string) {
	for _, s := range append(seeds, `null`, `[]`, `{"session_id":"a.b"}`, `{"session_id":"_owner"}`, `{"session_id":"s\u0000"}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decode(b)
		if err != nil {
			if !isBadRequest(err) {
				t.Fatalf("error %v is not a bad_request", err)
			}
			return
		}
		if !check(r) {
			t.Fatalf("accepted %+v", r)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("accepted %+v does not encode: %v", r, err)
		}
	})
}

func FuzzDecodeApproveRequest(f *testing.F) {
	fuzzDecoder(f, cluster.DecodeApproveRequest, func(r cluster.ApproveRequest) bool {
		return cluster.ValidToken(r.SessionID) == nil && r.ApprovalID != ""
	}, `{"session_id":"sess_1","approval_id":"apr_1","decision":"allow","scope":"session"}`,
		`{"session_id":"sess_1","approval_id":"apr_1","decision":"deny","reason":"\ud800"}`)
}

func FuzzDecodePatchRequest(f *testing.F) {
	fuzzDecoder(f, cluster.DecodePatchRequest, func(r cluster.PatchRequest) bool {
		return cluster.ValidToken(r.SessionID) == nil && (r.Mode != nil || r.MaxTurnCostUSD != nil || r.MaxSessionCostUSD != nil)
	}, `{"session_id":"sess_1","mode":"plan"}`, `{"session_id":"sess_1","max_turn_cost_usd":1.5,"max_session_cost_usd":0}`)
}

func FuzzDecodeCompactRequest(f *testing.F) {
	fuzzDecoder(f, cluster.DecodeCompactRequest, func(r cluster.CompactRequest) bool {
		return cluster.ValidToken(r.SessionID) == nil
	}, `{"session_id":"sess_1","instructions":"keep the tests"}`)
}

func FuzzDecodeMCPServersRequest(f *testing.F) {
	fuzzDecoder(f, cluster.DecodeMCPServersRequest, func(r cluster.MCPServersRequest) bool {
		return cluster.ValidToken(r.SessionID) == nil && (r.Set || len(r.Servers) == 0)
	}, `{"session_id":"sess_1","set":true,"servers":[{"name":"x","command":"true"}]}`, `{"session_id":"sess_1"}`)
}

func FuzzDecodeDeleteRequest(f *testing.F) {
	fuzzDecoder(f, cluster.DecodeDeleteRequest, func(r cluster.DeleteRequest) bool {
		return cluster.ValidToken(r.SessionID) == nil
	}, `{"session_id":"sess_1"}`, `{"session_id":""}`)
}
