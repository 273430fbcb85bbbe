package clustertest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// Answers to approval requests sent to a node that does not own the
// session's tree (docs/permissions.md, "Cluster mode"): the owner's turn
// waits on them, so the owner decides them, exactly as it would
// single-node.

// carefulNode starts a cluster node as users get it (default mode) on a
// machine whose kernel cannot confine shell commands, whatever this
// machine's can: every shell command asks.
func carefulNode(t *testing.T, natsURL, name string) *servertest.Harness {
	t.Helper()
	return servertest.Start(t, "", func(c *config.Config) {
		c.NATS, c.Node, c.DemoDelay = natsURL, name, time.Millisecond
		c.DefaultMode, c.ShellSandbox = permission.ModeDefault, permission.SandboxUnavailable
	})
}

func shellCmd(command string) string {
	b, _ := json.Marshal(map[string]string{"command": command})
	return "/tool shell " + string(b)
}

// requested waits for the next approval.requested c sees.
func requested(t *testing.T, c *streamtest.Client) (*protocol.EventEnvelope, protocol.ApprovalRequestedPayload) {
	t.Helper()
	evs := c.Events(wait, streamtest.UntilType(event.ApprovalRequested, ""))
	e := evs[len(evs)-1]
	return e, streamtest.PayloadOf[protocol.ApprovalRequestedPayload](t, e)
}

// resolvedOf waits for the approval.resolved of approval id that c sees.
func resolvedOf(t *testing.T, c *streamtest.Client, id string) (*protocol.EventEnvelope, protocol.ApprovalResolution) {
	t.Helper()
	var res protocol.ApprovalResolution
	evs := c.Events(wait, func(e *protocol.EventEnvelope) bool {
		if e.Type != string(event.ApprovalResolved) {
			return false
		}
		res = streamtest.PayloadOf[protocol.ApprovalResolution](t, e)
		return res.ApprovalID == id
	})
	return evs[len(evs)-1], res
}

// sameResolved checks that both clients saw the same approval.resolved
// of approval id, and returns it.
func sameResolved(t *testing.T, onA, onB *streamtest.Client, id string) (*protocol.EventEnvelope, protocol.ApprovalResolution) {
	t.Helper()
	ea, ra := resolvedOf(t, onA, id)
	eb, _ := resolvedOf(t, onB, id)
	if ea.ID != eb.ID || !streamtest.JSONEqual(ea.Payload, eb.Payload) {
		t.Fatalf("approval.resolved differs: node a %s %s, node b %s %s", ea.ID, ea.Payload, eb.ID, eb.Payload)
	}
	return ea, ra
}

// turnEnded matches the terminal event of a turn.
func turnEnded(turn string) func(*protocol.EventEnvelope) bool {
	return func(e *protocol.EventEnvelope) bool {
		switch event.Type(e.Type) {
		case event.TurnCompleted, event.TurnCancelled:
			return e.TurnID != nil && *e.TurnID == turn
		}
		return false
	}
}

// conflict decodes a 409 approval_resolved body.
func conflict(t *testing.T, body string) protocol.ApprovalConflict {
	t.Helper()
	var c protocol.ApprovalConflict
	if err := json.Unmarshal([]byte(body), &c); err != nil || c.Error.Code != protocol.CodeApprovalResolved || c.Resolution.ApprovalID == "" {
		t.Fatalf("a 409 without the winning resolution: %s (%v)", body, err)
	}
	return c
}

// TestApprovalAnsweredOnANonOwner: a turn runs on node A and asks; a
// client of node B sees approval.requested, answers through node B, the
// owner's turn runs the call, and both nodes' clients see the same
// approval.resolved. A second answer, on either node, is 409 with the
// winning resolution in the body, and every refusal reads as the
// owner's API gives it.
func TestApprovalAnsweredOnANonOwner(t *testing.T) {
	url := startNATS(t)
	a, b := carefulNode(t, url, "node-a"), carefulNode(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA, onB := attach(t, a, sid), attach(t, b, sid)

	turn := a.Submit(sid, shellCmd("echo routed"))
	evB, req := requested(t, onB)
	if evB.TurnID == nil || *evB.TurnID != turn || req.ToolName != "shell" {
		t.Fatalf("node b's approval.requested: %+v %+v", evB, req)
	}
	path := "/sessions/" + sid + "/approvals/" + req.ApprovalID
	status, body := raw(t, b, http.MethodPost, path, `{"decision":"allow","scope":"once"}`)
	var won protocol.ApprovalResolution
	if err := json.Unmarshal([]byte(body), &won); status != http.StatusOK || err != nil ||
		won.ApprovalID != req.ApprovalID || won.Decision != protocol.DecisionAllow || won.Reason != protocol.ApprovalReasonUser {
		t.Fatalf("answer on node b: %d %s, want 200 with the allow", status, body)
	}
	_, seen := sameResolved(t, onA, onB, req.ApprovalID)
	if seen.Decision != won.Decision || seen.Reason != won.Reason || seen.Scope != won.Scope {
		t.Fatalf("approval.resolved %+v, answered %+v", seen, won)
	}
	onA.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	onB.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	if holder := leaseHolder(t, url, sid); holder != "node-a" {
		t.Fatalf("the tree's lease is held by %q, want node-a", holder)
	}

	// A later answer on either node: 409, the winner beside the error.
	sa, ba := raw(t, a, http.MethodPost, path, `{"decision":"deny"}`)
	sb, bb := raw(t, b, http.MethodPost, path, `{"decision":"deny"}`)
	if sa != http.StatusConflict || sa != sb || ba != bb {
		t.Fatalf("a second answer: the owner %d %s, node b %d %s", sa, ba, sb, bb)
	}
	if c := conflict(t, bb); c.Resolution.Decision != won.Decision || c.Resolution.ApprovalID != won.ApprovalID {
		t.Fatalf("409 on node b names %+v, the winner was %+v", c.Resolution, won)
	}

	// Refusals read the same on both nodes.
	for _, tc := range []struct{ what, path, body string }{
		{"an unknown approval", "/sessions/" + sid + "/approvals/apr_nope", `{"decision":"allow"}`},
		{"a bad decision", path, `{"decision":"maybe"}`},
		{"a bad scope", path, `{"decision":"allow","scope":"forever"}`},
		{"a reason too long", path, `{"decision":"deny","reason":"` + strings.Repeat("r", protocol.MaxApprovalReason+1) + `"}`},
		{"an empty body", path, ``},
		{"malformed JSON", path, `{"decision":`},
		{"data after the object", path, `{"decision":"allow"} {}`},
		{"a wrong type", path, `{"decision":5}`},
	} {
		sa, ba := raw(t, a, http.MethodPost, tc.path, tc.body)
		sb, bb := raw(t, b, http.MethodPost, tc.path, tc.body)
		if sa < 400 || sa != sb || ba != bb {
			t.Errorf("%s: the owner answers %d %s, node b %d %s", tc.what, sa, ba, sb, bb)
		}
	}
}

// TestWorkerApprovalAnsweredThroughItsPlannerOnANonOwner: a worker's
// request reaches a client of its planner on node B, and an answer
// through node B with the planner's session id resolves it on the
// owner.
func TestWorkerApprovalAnsweredThroughItsPlannerOnANonOwner(t *testing.T) {
	url := startNATS(t)
	a, b := carefulNode(t, url, "node-a"), carefulNode(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA, onB := attach(t, a, sid), attach(t, b, sid)

	turn := b.Submit(sid, streamtest.DelegateCmd(shellCmd("echo from the worker")))
	evB, req := requested(t, onB)
	worker := evB.SessionID
	if worker == sid {
		t.Fatal("the planner asked, not its worker")
	}
	status, body := raw(t, b, http.MethodPost, "/sessions/"+sid+"/approvals/"+req.ApprovalID, `{"decision":"deny","reason":"not now"}`)
	var won protocol.ApprovalResolution
	if err := json.Unmarshal([]byte(body), &won); status != http.StatusOK || err != nil || won.SessionID != worker ||
		won.Decision != protocol.DecisionDeny || won.Message != "not now" {
		t.Fatalf("the worker's request answered on node b through its planner: %d %s", status, body)
	}
	if e, seen := sameResolved(t, onA, onB, req.ApprovalID); e.SessionID != worker || seen.Decision != protocol.DecisionDeny {
		t.Fatalf("approval.resolved of session %s: %+v", e.SessionID, seen)
	}
	a.WaitTurn(sid)
	onB.Events(wait, turnEnded(turn))
}

// TestApprovalAnsweredOnTwoNodesAtOnceHasOneWinner: two answers to the
// same request, one on the owner and one on another node, sent at
// once: exactly one wins (200), the other is 409 with the winner's
// resolution, and both nodes' clients see that one approval.resolved.
func TestApprovalAnsweredOnTwoNodesAtOnceHasOneWinner(t *testing.T) {
	url := startNATS(t)
	a, b := carefulNode(t, url, "node-a"), carefulNode(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA, onB := attach(t, a, sid), attach(t, b, sid)

	const rounds = 8
	wins := map[string]int{}
	for i := range rounds {
		turn := a.Submit(sid, shellCmd("echo round"))
		_, req := requested(t, onA)
		path := "/sessions/" + sid + "/approvals/" + req.ApprovalID
		var (
			wg       sync.WaitGroup
			statuses [2]int
			bodies   [2]string
		)
		for j, n := range []*servertest.Harness{a, b} {
			// Node a allows, node b denies: the resolution names the winner.
			answer := []string{`{"decision":"allow"}`, `{"decision":"deny"}`}[j]
			wg.Go(func() { statuses[j], bodies[j] = raw(t, n, http.MethodPost, path, answer) })
		}
		wg.Wait()
		win, lose := 0, 1
		if statuses[1] == http.StatusOK {
			win, lose = 1, 0
		}
		if statuses[win] != http.StatusOK || statuses[lose] != http.StatusConflict {
			t.Fatalf("round %d: node a %d %s, node b %d %s; want one 200 and one 409", i, statuses[0], bodies[0], statuses[1], bodies[1])
		}
		var won protocol.ApprovalResolution
		if err := json.Unmarshal([]byte(bodies[win]), &won); err != nil {
			t.Fatal(err)
		}
		if c := conflict(t, bodies[lose]); c.Resolution.Decision != won.Decision || c.Resolution.ApprovalID != won.ApprovalID {
			t.Fatalf("round %d: the 409 names %+v, the winner was %+v", i, c.Resolution, won)
		}
		if want := []string{protocol.DecisionAllow, protocol.DecisionDeny}[win]; won.Decision != want {
			t.Fatalf("round %d: node %d won with %q", i, win, won.Decision)
		}
		if _, seen := sameResolved(t, onA, onB, req.ApprovalID); seen.Decision != won.Decision {
			t.Fatalf("round %d: approval.resolved %+v, the winner %+v", i, seen, won)
		}
		wins[[]string{"owner", "non-owner"}[win]]++
		a.WaitTurn(sid)
		onB.Events(wait, turnEnded(turn))
	}
	t.Logf("wins over %d rounds: %v", rounds, wins)
}
