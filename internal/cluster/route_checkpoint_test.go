package cluster_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/protocol"
)

// checkpointOwner stands in for the owner's session manager's
// checkpoints: it records what reached it.
type checkpointOwner struct {
	mu  sync.Mutex
	log []string
}

func (h *checkpointOwner) saw(s string) {
	h.mu.Lock()
	h.log = append(h.log, s)
	h.mu.Unlock()
}

func (h *checkpointOwner) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.log)
}

// serveCheckpointKinds serves the routed requests about a session's
// checkpoints on tree from node n with h.
func serveCheckpointKinds(t *testing.T, n *node, tree string, h *checkpointOwner) {
	t.Helper()
	o := n.own(t, tree)
	hs := cluster.Handlers{}
	cluster.Handle(hs, cluster.KindTurns, func(_ context.Context, _ string, req cluster.TurnsRequest) (protocol.TurnList, error) {
		h.saw("turns " + req.Before)
		return protocol.TurnList{Turns: []protocol.TurnInfo{{TurnID: "turn_1"}}}, nil
	})
	cluster.Handle(hs, cluster.KindTurnChanges, func(_ context.Context, _ string, req cluster.TurnRequest) (protocol.TurnDiff, error) {
		h.saw("changes " + req.TurnID)
		return protocol.TurnDiff{TurnID: req.TurnID}, nil
	})
	cluster.Handle(hs, cluster.KindRevert, func(_ context.Context, _ string, req cluster.TurnRequest) (protocol.RevertResult, error) {
		h.saw("revert " + req.TurnID)
		if req.TurnID == "turn_idle" {
			return protocol.RevertResult{}, &cluster.RemoteError{Code: protocol.CodeNothingToRevert, Message: "nothing to revert"}
		}
		return protocol.RevertResult{TurnID: req.TurnID, UndoCheckpointID: "ckpt_u"}, nil
	})
	cluster.Handle(hs, cluster.KindRestore, func(_ context.Context, _ string, req cluster.RestoreRequest) (protocol.RevertResult, error) {
		h.saw("restore " + req.CheckpointID)
		return protocol.RevertResult{CheckpointID: req.CheckpointID}, nil
	})
	cluster.Handle(hs, cluster.KindFork, func(_ context.Context, _ string, req cluster.ForkRequest) (protocol.ForkResult, error) {
		h.saw("fork " + req.MessageID)
		return protocol.ForkResult{SessionSummary: protocol.SessionSummary{ID: "sess_fork"}}, nil
	})
	serving, err := n.router.Serve(o.Context(), tree, hs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(serving.Stop)
}

// TestCheckpointRequestsReachTheOwner: the turn listing, a turn's
// changes, a revert, a restore and a fork sent from a node that does
// not own the tree reach the owner's handlers with their fields, a
// refusal comes back with the owner's code, and the router reports
// each kind.
func TestCheckpointRequestsReachTheOwner(t *testing.T) {
	s := startServer(t)
	cfg := cluster.LeaseConfig{TTL: time.Minute}
	a, b := newNode(t, s, "node-a", cfg), newNode(t, s, "node-b", cfg)
	var seen observed
	b.router.Observe(seen.add)
	tree := newSessionID()
	owner := &checkpointOwner{}
	serveCheckpointKinds(t, a, tree, owner)

	var list protocol.TurnList
	if err := b.router.Call(ctx(t), tree, cluster.KindTurns.Verb, cluster.TurnsRequest{SessionID: tree, Before: "turn_9", Limit: 5}, &list); err != nil ||
		len(list.Turns) != 1 {
		t.Fatalf("turns via node-b = %+v, %v", list, err)
	}
	var diff protocol.TurnDiff
	if err := b.router.Call(ctx(t), tree, cluster.KindTurnChanges.Verb, cluster.TurnRequest{SessionID: tree, TurnID: "turn_1"}, &diff); err != nil || diff.TurnID != "turn_1" {
		t.Fatalf("changes via node-b = %+v, %v", diff, err)
	}
	var res protocol.RevertResult
	if err := b.router.Call(ctx(t), tree, cluster.KindRevert.Verb, cluster.TurnRequest{SessionID: tree, TurnID: "turn_1"}, &res); err != nil || res.UndoCheckpointID != "ckpt_u" {
		t.Fatalf("revert via node-b = %+v, %v", res, err)
	}
	var re *cluster.RemoteError
	if err := b.router.Call(ctx(t), tree, cluster.KindRevert.Verb, cluster.TurnRequest{SessionID: tree, TurnID: "turn_idle"}, &res); !errors.As(err, &re) || re.Code != protocol.CodeNothingToRevert {
		t.Fatalf("revert of an idle turn via node-b: %v, want nothing_to_revert", err)
	}
	if err := b.router.Call(ctx(t), tree, cluster.KindRestore.Verb, cluster.RestoreRequest{SessionID: tree, CheckpointID: "ckpt_u"}, &res); err != nil || res.CheckpointID != "ckpt_u" {
		t.Fatalf("restore via node-b = %+v, %v", res, err)
	}
	var fork protocol.ForkResult
	freq := cluster.ForkRequest{SessionID: tree, ForkRequest: protocol.ForkRequest{MessageID: "msg_1"}}
	if err := b.router.Call(ctx(t), tree, cluster.KindFork.Verb, freq, &fork); err != nil || fork.ID != "sess_fork" {
		t.Fatalf("fork via node-b = %+v, %v", fork, err)
	}

	want := []string{"turns turn_9", "changes turn_1", "revert turn_1", "revert turn_idle", "restore ckpt_u", "fork msg_1"}
	if got := owner.calls(); !slices.Equal(got, want) {
		t.Fatalf("owner served %q, want %q", got, want)
	}
	wantSeen := []string{"turns ok", "turn_changes ok", "revert ok", "revert refused", "restore ok", "fork ok"}
	if got := seen.list(); !slices.Equal(got, wantSeen) {
		t.Fatalf("observed %q, want %q", got, wantSeen)
	}

	// Malformed requests never reach the handlers.
	nc := connect(t, s)
	rpc := "metis.rpc." + tree + "."
	badRequests(t, nc, []struct{ subject, body string }{
		{rpc + "turns", `{"session_id":"` + tree + `","limit":0}`},
		{rpc + "turns", `{"session_id":"a.b","limit":5}`},
		{rpc + "turn_changes", `{"session_id":"` + tree + `"}`},
		{rpc + "revert", `{"session_id":"` + tree + `","turn_id":5}`},
		{rpc + "restore", `{"session_id":"` + tree + `","checkpoint_id":""}`},
		{rpc + "fork", `{"session_id":"_owner"}`},
		{rpc + "fork", `[]`},
	})
	if got := owner.calls(); len(got) != len(want) {
		t.Fatalf("bad requests reached the handlers: %q", got[len(want):])
	}
}

func FuzzDecodeTurnsRequest(f *testing.F) {
	fuzzDecoder(f, cluster.DecodeTurnsRequest, func(r cluster.TurnsRequest) bool {
		return cluster.ValidToken(r.SessionID) == nil && r.Limit > 0
	}, `{"session_id":"sess_1","limit":50}`, `{"session_id":"sess_1","before":"turn_1","limit":-1}`)
}

func FuzzDecodeTurnRequest(f *testing.F) {
	fuzzDecoder(f, cluster.DecodeTurnRequest, func(r cluster.TurnRequest) bool {
		return cluster.ValidToken(r.SessionID) == nil && r.TurnID != ""
	}, `{"session_id":"sess_1","turn_id":"turn_1"}`)
}

func FuzzDecodeRestoreRequest(f *testing.F) {
	fuzzDecoder(f, cluster.DecodeRestoreRequest, func(r cluster.RestoreRequest) bool {
		return cluster.ValidToken(r.SessionID) == nil && r.CheckpointID != ""
	}, `{"session_id":"sess_1","checkpoint_id":"ckpt_1"}`)
}

func FuzzDecodeForkRequest(f *testing.F) {
	fuzzDecoder(f, cluster.DecodeForkRequest, func(r cluster.ForkRequest) bool {
		return cluster.ValidToken(r.SessionID) == nil
	}, `{"session_id":"sess_1","message_id":"msg_1","checkpoint":true,"mode":"plan"}`)
}
