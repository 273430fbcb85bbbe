package clustertest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/compact"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// Requests that change a session's running state, sent to a node that
// does not own the session's tree: a change of mode or cost limits, a
// compaction by hand and the session's own MCP servers are the owner's
// (docs/scale-out.md, "Routing to the owner").

// sameEnvelope waits until both clients saw an event of type typ that
// match accepts, checks they saw the same one, and returns it.
func sameEnvelope(t *testing.T, onA, onB *streamtest.Client, typ event.Type, match func(*protocol.EventEnvelope) bool) *protocol.EventEnvelope {
	t.Helper()
	until := func(e *protocol.EventEnvelope) bool { return e.Type == string(typ) && match(e) }
	ea, eb := onA.Events(wait, until), onB.Events(wait, until)
	a, b := ea[len(ea)-1], eb[len(eb)-1]
	if a.ID != b.ID || !streamtest.JSONEqual(a.Payload, b.Payload) {
		t.Fatalf("%s differs: node a %s %s, node b %s %s", typ, a.ID, a.Payload, b.ID, b.Payload)
	}
	return a
}

// emittedBy waits until node h's bus delivered event id (h emitted it,
// or relayed it from the log).
func emittedBy(t *testing.T, h *servertest.Harness, sid, id string) {
	t.Helper()
	servertest.WaitFor(t, id+" on "+h.Config.Node, func() bool {
		return slices.ContainsFunc(h.Live.Events(sid), func(e *event.Event) bool { return e.ID == id })
	})
}

// sameRefusals sends each request to both nodes and checks that node b
// answers it as the owner (node a) does, with an error.
func sameRefusals(t *testing.T, a, b *servertest.Harness, cases []struct{ what, method, path, body string }) {
	t.Helper()
	for _, tc := range cases {
		sa, ba := raw(t, a, tc.method, tc.path, tc.body)
		sb, bb := raw(t, b, tc.method, tc.path, tc.body)
		if sa < 400 || sa != sb || ba != bb {
			t.Errorf("%s: the owner answers %d %s, node b %d %s", tc.what, sa, ba, sb, bb)
		}
	}
}

func writeCmd(path string) string {
	b, _ := json.Marshal(map[string]string{"path": path, "content": "written by " + path})
	return "/tool write_file " + string(b)
}

// TestPatchSentToANonOwnerChangesTheOwnersSession: a PATCH of the mode
// sent to node B while node A's turn waits for a file write's approval
// is the owner's: session.mode_changed is committed once, every client
// sees it, the owner's waiting request is judged again in the new mode
// (accept_edits allows the write), and the answer is the summary. A
// change of cost limits is committed the same way, and refusals read
// as the owner's.
func TestPatchSentToANonOwnerChangesTheOwnersSession(t *testing.T) {
	url := startNATS(t)
	a, b := carefulNode(t, url, "node-a"), carefulNode(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA, onB := attach(t, a, sid), attach(t, b, sid)

	turn := a.Submit(sid, writeCmd("notes.txt"))
	_, req := requested(t, onB)
	path := "/sessions/" + sid
	status, body := raw(t, b, http.MethodPatch, path, `{"mode":"accept_edits"}`)
	var sum protocol.SessionSummary
	if err := json.Unmarshal([]byte(body), &sum); status != http.StatusOK || err != nil || sum.ID != sid || sum.Mode != "accept_edits" {
		t.Fatalf("PATCH mode on node b: %d %s, want 200 with the summary in accept_edits", status, body)
	}
	changed := sameEnvelope(t, onA, onB, event.SessionModeChanged, func(*protocol.EventEnvelope) bool { return true })
	if p := streamtest.PayloadOf[protocol.SessionModeChangedPayload](t, changed); p.Mode != "accept_edits" || p.PreviousMode != "default" {
		t.Fatalf("session.mode_changed %+v", p)
	}
	emittedBy(t, a, sid, changed.ID)
	_, res := sameResolved(t, onA, onB, req.ApprovalID)
	if res.Decision != protocol.DecisionAllow || !strings.Contains(res.Message, "accept_edits") {
		t.Fatalf("the owner's waiting write, after the switch: %+v", res)
	}
	a.WaitTurn(sid)
	onB.Events(wait, turnEnded(turn))

	status, body = raw(t, b, http.MethodPatch, path, `{"max_turn_cost_usd":1.5,"max_session_cost_usd":20}`)
	sum = protocol.SessionSummary{}
	if err := json.Unmarshal([]byte(body), &sum); status != http.StatusOK || err != nil || sum.MaxTurnCostUSD != 1.5 || sum.MaxSessionCostUSD != 20 {
		t.Fatalf("PATCH limits on node b: %d %s, want 200 with the limits", status, body)
	}
	budget := sameEnvelope(t, onA, onB, event.SessionBudgetChanged, func(*protocol.EventEnvelope) bool { return true })
	emittedBy(t, a, sid, budget.ID)
	if holder := leaseHolder(t, url, sid); holder != "node-a" {
		t.Fatalf("the tree's lease is held by %q, want node-a", holder)
	}

	sameRefusals(t, a, b, []struct{ what, method, path, body string }{
		{"an unknown mode", http.MethodPatch, path, `{"mode":"reckless"}`},
		{"nothing to change", http.MethodPatch, path, `{}`},
		{"a negative limit", http.MethodPatch, path, `{"max_turn_cost_usd":-1}`},
		{"a limit too high", http.MethodPatch, path, `{"max_session_cost_usd":1e300}`},
		{"a good mode and a bad limit", http.MethodPatch, path, `{"mode":"accept_edits","max_turn_cost_usd":-1}`},
		{"an empty body", http.MethodPatch, path, ``},
		{"malformed JSON", http.MethodPatch, path, `{"mode":`},
		{"a wrong type", http.MethodPatch, path, `{"mode":5}`},
	})
}

// TestCompactSentToANonOwnerRunsOnTheOwner: a compaction by hand sent
// to node B runs in node A's turn slot: the answer is 202 with its id,
// its events are the owner's and reach every client, and while a turn
// runs on the owner both nodes refuse it with the owner's 409.
func TestCompactSentToANonOwnerRunsOnTheOwner(t *testing.T) {
	url := startNATS(t)
	a, b := carefulNode(t, url, "node-a"), carefulNode(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA, onB := attach(t, a, sid), attach(t, b, sid)
	a.Submit(sid, "hello there")
	a.WaitTurn(sid)

	path := "/sessions/" + sid + "/compact"
	status, body := raw(t, b, http.MethodPost, path, `{"instructions":"keep the greeting"}`)
	var acc protocol.CompactAccepted
	if err := json.Unmarshal([]byte(body), &acc); status != http.StatusAccepted || err != nil || !strings.HasPrefix(acc.CompactionID, "cmp_") {
		t.Fatalf("compact on node b: %d %s, want 202 with a compaction id", status, body)
	}
	started := sameEnvelope(t, onA, onB, event.ContextCompacting, func(e *protocol.EventEnvelope) bool {
		return streamtest.PayloadOf[protocol.ContextCompactingPayload](t, e).CompactionID == acc.CompactionID
	})
	emittedBy(t, a, sid, started.ID)
	a.WaitTurn(sid) // the compaction holds the owner's turn slot until it ends

	// While a turn waits on the owner, a compaction is refused there.
	a.Submit(sid, shellCmd("echo busy"))
	_, req := requested(t, onB)
	sameRefusals(t, a, b, []struct{ what, method, path, body string }{
		{"a turn in flight", http.MethodPost, path, `{}`},
		{"instructions too long", http.MethodPost, path, `{"instructions":"` + strings.Repeat("k", compact.MaxInstructions+1) + `"}`},
		{"malformed JSON", http.MethodPost, path, `{"instructions":`},
		{"a wrong type", http.MethodPost, path, `{"instructions":5}`},
	})
	if st, _ := raw(t, b, http.MethodPost, "/sessions/"+sid+"/approvals/"+req.ApprovalID, `{"decision":"deny"}`); st != http.StatusOK {
		t.Fatalf("deny on node b: %d", st)
	}
	a.WaitTurn(sid)
}

// mcpNames returns the names of the servers of an MCP status.
func mcpNames(st protocol.MCPStatus) []string {
	var out []string
	for _, s := range st.Servers {
		out = append(out, s.Name)
	}
	return out
}

// TestSessionMCPServersSetOnANonOwnerAreTheOwners: a session's own MCP
// servers set through node B are set in the owner's MCP manager (the
// one its turns use), not node B's; node B shows the owner's view, and
// a DELETE through node B clears them on the owner. A bad list is
// refused as the owner refuses it.
func TestSessionMCPServersSetOnANonOwnerAreTheOwners(t *testing.T) {
	url := startNATS(t)
	a, b := carefulNode(t, url, "node-a"), carefulNode(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	path := "/sessions/" + sid + "/mcp_servers"

	status, body := raw(t, b, http.MethodPut, path, `{"servers":[{"name":"notes","command":"/bin/true"}]}`)
	var st protocol.MCPStatus
	if err := json.Unmarshal([]byte(body), &st); status != http.StatusOK || err != nil || !slices.Contains(mcpNames(st), "notes") {
		t.Fatalf("PUT on node b: %d %s, want 200 listing the server", status, body)
	}
	if names := mcpNames(a.Server.MCP.SessionStatus(t.Context(), sid)); !slices.Contains(names, "notes") {
		t.Fatalf("the owner's MCP manager serves %q to the session, want notes", names)
	}
	if names := mcpNames(b.Server.MCP.SessionStatus(t.Context(), sid)); slices.Contains(names, "notes") {
		t.Fatalf("node b's own MCP manager serves %q to the session", names)
	}
	status, body = raw(t, b, http.MethodGet, path, ``)
	if err := json.Unmarshal([]byte(body), &st); status != http.StatusOK || err != nil || !slices.Contains(mcpNames(st), "notes") {
		t.Fatalf("GET on node b: %d %s, want the owner's view", status, body)
	}

	if status, body := raw(t, b, http.MethodDelete, path, ``); status != http.StatusOK {
		t.Fatalf("DELETE on node b: %d %s", status, body)
	}
	if names := mcpNames(a.Server.MCP.SessionStatus(t.Context(), sid)); slices.Contains(names, "notes") {
		t.Fatalf("after DELETE on node b, the owner still serves %q", names)
	}

	sameRefusals(t, a, b, []struct{ what, method, path, body string }{
		{"too many servers", http.MethodPut, path, `{"servers":[` +
			strings.TrimSuffix(strings.Repeat(`{"command":"/bin/true"},`, protocol.MaxMCPSessionServers+1), ",") + `]}`},
		{"a server without a command or URL", http.MethodPut, path, `{"servers":[{"name":"x"}]}`},
		{"an empty body", http.MethodPut, path, ``},
		{"malformed JSON", http.MethodPut, path, `{"servers":`},
		{"a wrong type", http.MethodPut, path, `{"servers":5}`},
	})
}
