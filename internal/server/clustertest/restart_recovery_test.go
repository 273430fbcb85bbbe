package clustertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/natstest"
	"github.com/metis-agent/metis/internal/streamtest"
)

// terminalOf returns the terminal event of a turn in the log, or nil.
func terminalOf(t *testing.T, natsURL, tree, turn string) *event.Event {
	t.Helper()
	for _, e := range logEvents(t, natsURL, tree) {
		if e.TurnID == turn && (e.Type == event.TurnCancelled || e.Type == event.TurnCompleted) {
			return e
		}
	}
	return nil
}

// waitTerminal polls the log until a turn has ended there.
func waitTerminal(t *testing.T, natsURL, tree, turn string) *event.Event {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if e := terminalOf(t, natsURL, tree, turn); e != nil {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn %s of %s did not end in the log", turn, tree)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holdLease takes a tree's lease for node-x once it is free, and keeps
// it (renewed) until the returned release is called or the test ends.
func holdLease(t *testing.T, natsURL, tree string) (release func()) {
	t.Helper()
	_, js := natstest.Connect(t, natsURL)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	ls, err := cluster.OpenLeases(ctx, js, "node-x", cluster.LeaseConfig{TTL: failoverTTL})
	if err != nil {
		t.Fatal(err)
	}
	for {
		l, err := ls.Acquire(ctx, tree)
		if err == nil {
			release = func() {
				if err := l.Release(context.Background()); err != nil {
					t.Error(err)
				}
			}
			t.Cleanup(release)
			return release
		}
		if !errors.Is(err, cluster.ErrLeaseHeld) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRestartedNodeEndsOnlyTheTurnsOfTreesItCanTake: crash recovery in
// cluster mode. Node a (its own process) runs a turn in each of two
// trees and is killed; while no metis node runs, another holder
// (node-x) takes the lease of one of them. Node a restarts on its home:
// it ends the turn of the tree whose lease is free (turn.cancelled,
// owner_lost), and leaves the other alone until node-x lets the tree
// go, when it takes that one over too.
func TestRestartedNodeEndsOnlyTheTurnsOfTreesItCanTake(t *testing.T) {
	url := startNATS(t)
	a := startProcNode(t, url, "node-a", failoverTTL, 5*time.Millisecond)
	free, held := a.CreateSession(), a.CreateSession()
	onFree, onHeld := attach(t, a.Harness, free), attach(t, a.Harness, held)
	freeTurn := a.Submit(free, `/tool shell {"command": "exec sleep 300"}`)
	heldTurn := a.Submit(held, `/tool shell {"command": "exec sleep 300"}`)
	onFree.Events(wait, streamtest.UntilType(event.ToolCalled, freeTurn))
	onHeld.Events(wait, streamtest.UntilType(event.ToolCalled, heldTurn))
	a.Kill()
	letGo := holdLease(t, url, held)

	startProcNodeAt(t, url, "node-a", a.Home, failoverTTL, 5*time.Millisecond)
	end := waitTerminal(t, url, free, freeTurn)
	if end.Type != event.TurnCancelled || !jsonHas(t, end.Payload, "reason", "owner_lost") {
		t.Fatalf("the free tree's turn ended with %s %s", end.Type, end.Payload)
	}
	if e := terminalOf(t, url, held, heldTurn); e != nil {
		t.Fatalf("the restarted node ended a turn of a tree node-x holds: %s %s", e.Type, e.Payload)
	}
	if holder := leaseHolder(t, url, free); holder != "node-a" {
		t.Fatalf("the free tree's lease is held by %q, want node-a", holder)
	}

	letGo()
	end = waitTerminal(t, url, held, heldTurn)
	if end.Type != event.TurnCancelled || !jsonHas(t, end.Payload, "reason", "owner_lost") {
		t.Fatalf("the held tree's turn ended with %s %s", end.Type, end.Payload)
	}
}

// jsonHas reports whether a JSON object has key with the string value.
func jsonHas(t *testing.T, raw []byte, key, value string) bool {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m[key] == value
}
