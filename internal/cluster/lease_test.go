package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/metis-agent/metis/internal/cluster"
)

func openLeases(t *testing.T, s *server.Server, node string, cfg cluster.LeaseConfig) *cluster.Leases {
	t.Helper()
	l := openLog(t, connect(t, s), cluster.LogConfig{})
	ls, err := cluster.OpenLeases(ctx(t), l.JetStream(), node, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func release(t *testing.T, l *cluster.Lease) {
	t.Helper()
	t.Cleanup(func() {
		if err := l.Release(context.Background()); err != nil {
			t.Errorf("release: %v", err)
		}
	})
}

func TestLeaseIsExclusiveAndRenewed(t *testing.T) {
	s := startServer(t)
	cfg := cluster.LeaseConfig{TTL: 2 * time.Second, Renew: 250 * time.Millisecond}
	a, b := openLeases(t, s, "node-a", cfg), openLeases(t, s, "node-b", cfg)
	tree := newSessionID()

	la, err := a.Acquire(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	release(t, la)
	if _, err := b.Acquire(ctx(t), tree); !errors.Is(err, cluster.ErrLeaseHeld) {
		t.Fatalf("second acquire: %v, want ErrLeaseHeld", err)
	}
	if holder, _, err := b.Holder(ctx(t), tree); err != nil || holder != "node-a" {
		t.Fatalf("holder = %q, %v", holder, err)
	}
	// Renewals keep the lease well past its TTL.
	first := la.Revision()
	until := time.Now().Add(3 * cfg.TTL)
	for time.Now().Before(until) {
		if _, err := b.Acquire(ctx(t), tree); !errors.Is(err, cluster.ErrLeaseHeld) {
			t.Fatalf("acquire while renewed: %v, want ErrLeaseHeld", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if la.Context().Err() != nil {
		t.Fatalf("renewed lease lost: %v", context.Cause(la.Context()))
	}
	if la.Revision() <= first {
		t.Fatalf("revision %d after renewals, want more than %d", la.Revision(), first)
	}
}

func TestLeaseReleaseFreesTheTreeAtOnce(t *testing.T) {
	s := startServer(t)
	cfg := cluster.LeaseConfig{TTL: time.Minute}
	a, b := openLeases(t, s, "node-a", cfg), openLeases(t, s, "node-b", cfg)
	tree := newSessionID()
	la, err := a.Acquire(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(la.Context()), cluster.ErrLeaseReleased) {
		t.Fatalf("released lease's cause = %v", context.Cause(la.Context()))
	}
	lb, err := b.Acquire(ctx(t), tree)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	release(t, lb)
}

func TestDeadOwnersLeaseExpiresAndIsTaken(t *testing.T) {
	s := startServer(t)
	// node-a never renews: a process that died or is paused.
	dead := openLeases(t, s, "node-a", cluster.LeaseConfig{TTL: time.Second, Renew: time.Hour})
	live := openLeases(t, s, "node-b", cluster.LeaseConfig{TTL: time.Second, Renew: liveRenew})
	tree := newSessionID()
	la, err := dead.Acquire(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	release(t, la)
	lb := acquireEventually(t, live, tree)
	release(t, lb)
	if holder, rev, err := live.Holder(ctx(t), tree); err != nil || holder != "node-b" || rev != lb.Revision() {
		t.Fatalf("holder = %q rev %d (%v), want node-b rev %d", holder, rev, err, lb.Revision())
	}
	// The old holder finds out at its next renewal, and stops.
	if err := la.Renew(ctx(t)); !errors.Is(err, cluster.ErrLeaseLost) {
		t.Fatalf("stale renewal: %v, want ErrLeaseLost", err)
	}
	if !errors.Is(context.Cause(la.Context()), cluster.ErrLeaseLost) {
		t.Fatalf("stale lease's cause = %v, want ErrLeaseLost", context.Cause(la.Context()))
	}
}

// acquireEventually retries until the tree's current lease expires.
func acquireEventually(t *testing.T, ls *cluster.Leases, tree string) *cluster.Lease {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := ls.Acquire(ctx(t), tree)
		if err == nil {
			return l
		}
		if !errors.Is(err, cluster.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("acquire: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
