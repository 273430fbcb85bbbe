package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metis-agent/metis/internal/cluster"
)

// TestRenewalStoredButUnansweredKeepsTheLease: a renewal the bucket
// stored but whose answer was lost (it timed out on a loaded machine)
// leaves the key at a revision the owner never learnt. The next
// renewal finds the key holding the owner's own lease and keeps it; a
// key written by anyone else still loses it.
func TestRenewalStoredButUnansweredKeepsTheLease(t *testing.T) {
	s := startServer(t)
	cfg := cluster.LeaseConfig{TTL: time.Minute, Renew: 20 * time.Second} // no renewal of its own during the test
	a := openLeases(t, s, "node-a", cfg)
	tree := newSessionID()
	la, err := a.Acquire(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	release(t, la)

	js, err := jetstream.New(connect(t, s))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx(t), cluster.DefaultLeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	// The lost renewal: the owner's own value, written at its revision.
	e, err := kv.Get(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := kv.Update(ctx(t), tree, e.Value(), la.Revision())
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Renew(ctx(t)); err != nil {
		t.Fatalf("renewal after a stored but unanswered one: %v", err)
	}
	if la.Context().Err() != nil || la.Revision() <= stored {
		t.Fatalf("lease %v at revision %d, want held past %d", context.Cause(la.Context()), la.Revision(), stored)
	}

	// Another writer's value is not the owner's lease: it is lost.
	if _, err := kv.Update(ctx(t), tree, []byte(`{"node":"node-b"}`), la.Revision()); err != nil {
		t.Fatal(err)
	}
	if err := la.Renew(ctx(t)); !errors.Is(err, cluster.ErrLeaseLost) {
		t.Fatalf("renewal after another node wrote the key: %v, want ErrLeaseLost", err)
	}
}
