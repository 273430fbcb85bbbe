package cluster_test

import (
	"errors"
	"testing"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/store"
)

// TestDeletionRecordRemovesTheTreeFromEveryStore: the owner's deletion
// record removes the session from the store of every node's projection
// (not only the owner's), a node that rebuilds its store from the log
// included; a deletion of a session no store holds and a second one of
// the same session are applied without harm, no record is skipped, and
// the projection goes on with what comes after.
func TestDeletionRecordRemovesTheTreeFromEveryStore(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	b := newReadNode(t, s, "node-b", t.TempDir())
	tree, other := newSessionID(), newSessionID()
	leave, err := b.feeds.Join(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	owner, otherOwner := a.own(t, tree), a.own(t, other)
	g, gOther := newEvents(t), newEvents(t)
	evs, _ := publishTurn(t, owner, g, tree, "to be deleted")
	publishTurn(t, otherOwner, gOther, other, "kept")

	var deleted uint64
	for _, sid := range []string{tree, tree, newSessionID()} {
		p, err := owner.PublishDeletion(ctx(t), sid)
		if err != nil {
			t.Fatalf("publish the deletion of %s: %v", sid, err)
		}
		deleted = p.Seq
	}
	_, last := publishTurn(t, otherOwner, gOther, other, "after the deletion")
	// The feed of node-b's clients passes the deletions by: they get
	// the tree's events and nothing more, as on the owner.
	if err := b.feeds.WaitDelivered(ctx(t), tree, deleted); err != nil {
		t.Fatal(err)
	}
	if got := b.sink.events(); len(got) != len(evs) {
		t.Errorf("node-b's feed handed over %d events, want the tree's %d", len(got), len(evs))
	}
	c := newReadNode(t, s, "node-c", t.TempDir()) // rebuilds from the log
	for _, n := range []*readNode{a, b, c} {
		if err := n.proj.WaitApplied(ctx(t), last); err != nil {
			t.Fatalf("%s: %v", n.name, err)
		}
		if _, err := n.st.Session(ctx(t), tree); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s still holds the deleted session: %v", n.name, err)
		}
		if evs, err := n.st.Events(ctx(t), store.EventQuery{SessionIDs: []string{tree}}); err != nil || len(evs) != 0 {
			t.Errorf("%s holds %d events of the deleted session (%v)", n.name, len(evs), err)
		}
		if msgs, _, err := n.st.Messages(ctx(t), other, "", 10); err != nil || len(msgs) != 4 {
			t.Errorf("%s: %d messages of the other tree (%v), want 4", n.name, len(msgs), err)
		}
		if n.proj.Skipped() != 0 {
			t.Errorf("%s skipped %d records", n.name, n.proj.Skipped())
		}
	}
}

// TestDeletionByADeposedOwnerIsFenced: a deletion is fenced like an
// event: once another node claimed the tree, the old owner's deletion
// is refused and nothing reaches the log.
func TestDeletionByADeposedOwnerIsFenced(t *testing.T) {
	nc := connect(t, startServer(t))
	l := openLog(t, nc, cluster.LogConfig{})
	tree := newSessionID()
	old, err := l.Claim(ctx(t), tree, "node-a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(ctx(t), tree, "node-b", 2); err != nil {
		t.Fatal(err)
	}
	before, err := l.LastCatalogSeq(ctx(t), tree)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.PublishDeletion(ctx(t), tree); !errors.Is(err, cluster.ErrFenced) {
		t.Fatalf("a deposed owner's deletion: %v, want ErrFenced", err)
	}
	if after, err := l.LastCatalogSeq(ctx(t), tree); err != nil || after != before {
		t.Fatalf("the tree's catalog moved from %d to %d (%v)", before, after, err)
	}
	if _, err := old.PublishDeletion(ctx(t), "a.b"); err == nil {
		t.Fatal("a deletion of an invalid session id was published")
	}
}

func FuzzDecodeDeletion(f *testing.F) {
	f.Add([]byte(`{"session_id":"sess_01JZ0000000000000000000000"}`))
	f.Add([]byte(`{"session_id":"_owner"}`))
	f.Add([]byte(`{"session_id":"a.b"}`))
	f.Add([]byte(`{"session_id":"s","extra":1}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"session_id":"s"} {}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		sid, err := cluster.DecodeDeletion(b)
		if err != nil {
			if !errors.Is(err, cluster.ErrRecord) {
				t.Fatalf("error %v does not wrap ErrRecord", err)
			}
			return
		}
		if cluster.ValidToken(sid) != nil {
			t.Fatalf("decoded an invalid session id %q", sid)
		}
	})
}
