package cluster_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// imageOf returns n random bytes stored as an image, by their SHA-256.
func imageOf(t testing.TB, n int) store.Image {
	t.Helper()
	data := make([]byte, n)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return store.Image{SHA256: hex.EncodeToString(sum[:]), MediaType: "image/png", Size: int64(n), Width: 640, Height: 480, Data: data}
}

// publishGroup publishes one catalog event of o's tree with ops (stamped
// with its id, as the bus does) and returns it with its sequence.
func publishGroup(t *testing.T, o *cluster.Owner, g *events, sid string, typ event.Type, turn string, ops ...store.Op) (*event.Event, uint64) {
	t.Helper()
	ev := g.make(sid, typ, turn, map[string]any{})
	for i, op := range ops {
		if st, ok := op.(store.EventStamper); ok {
			ops[i] = st.StampEvent(ev.ID)
		}
	}
	p, err := o.PublishCatalog(ctx(t), ev, append(ops, store.AppendEvent{Event: ev}))
	if err != nil {
		t.Fatalf("publish %s: %v", typ, err)
	}
	return ev, p.Seq
}

// TestProjectionAppliesTheConversationsOps: the ops a conversation
// commits besides messages and turns reach every node's projection: a
// rename and an archive (PATCH /sessions/{id}; the record does not
// depend on the event they are committed with), a queued turn and the
// end of its wait, images (two of 2 MB, more than a NATS message may
// hold by default: their bytes go through the image bucket, not the
// log), and a fork's right to its source's images.
func TestProjectionAppliesTheConversationsOps(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	b := newReadNode(t, s, "node-b", t.TempDir())
	sid, fork := newSessionID(), newSessionID()
	o, of := a.own(t, sid), a.own(t, fork)
	g, gf := newEvents(t), newEvents(t)
	now := time.Now().UTC().Truncate(time.Microsecond)

	publishGroup(t, o, g, sid, event.SessionCreated, "",
		store.CreateSession{Session: store.Session{ID: sid, WorkspacePath: "/w", ActiveModel: "builtin:demo", CreatedAt: now, LastActivityAt: now}})
	big, small := imageOf(t, 2<<20), imageOf(t, 2<<20)
	turnID := event.NewID("turn_")
	user := message.Message{ID: event.NewID("msg_"), SessionID: sid, TurnID: turnID, Role: message.RoleUser, Status: message.StatusComplete, CreatedAt: now,
		Content: []message.Block{message.Text("look"), {Type: message.BlockImage, MediaType: big.MediaType, SHA256: big.SHA256, Size: big.Size}}}
	queued := message.Message{ID: event.NewID("msg_"), SessionID: sid, Role: message.RoleUser, Status: message.StatusComplete, CreatedAt: now,
		Content: []message.Block{message.Text("and this"), {Type: message.BlockImage, MediaType: small.MediaType, SHA256: small.SHA256, Size: small.Size}}}
	qid := event.NewID("turn_")
	publishGroup(t, o, g, sid, event.TurnStarted, turnID,
		store.PutImages{SessionID: sid, Images: []store.Image{big}},
		store.PutTurn{Turn: store.Turn{ID: turnID, SessionID: sid, Status: store.TurnInFlight, StartedAt: now}},
		store.PutMessage{Message: user})
	queuedEv, _ := publishGroup(t, o, g, sid, event.TurnQueued, "",
		store.PutImages{SessionID: sid, Images: []store.Image{small}},
		store.QueueTurn{Turn: store.QueuedTurn{TurnID: qid, SessionID: sid, Message: queued, Source: protocol.QueueSourceQueue, QueuedAt: now}})
	publishGroup(t, o, g, sid, event.SessionModeChanged, "", store.Rename{SessionID: sid, Title: "renamed"})
	publishGroup(t, o, g, sid, event.SessionModeChanged, "", store.SetArchived{SessionID: sid, Archived: true})
	publishGroup(t, o, g, sid, event.TurnCompleted, turnID,
		store.PutTurn{Turn: store.Turn{ID: turnID, SessionID: sid, Status: store.TurnCompleted, StartedAt: now, EndedAt: now}})
	_, last := publishGroup(t, o, g, sid, event.TurnCancelled, qid, store.EndQueuedTurn{TurnID: qid})
	copied := user
	copied.ID, copied.SessionID, copied.TurnID = event.NewID("msg_"), fork, ""
	_, lastFork := publishGroup(t, of, gf, fork, event.SessionCreated, "",
		store.CreateSession{Session: store.Session{ID: fork, WorkspacePath: "/w", CreatedAt: now, LastActivityAt: now, ForkedFromSessionID: sid}},
		store.PutMessage{Message: copied},
		store.LinkImages{SessionID: fork, SHA256s: []string{big.SHA256}})

	for _, n := range []*readNode{a, b} {
		if err := n.proj.WaitApplied(ctx(t), max(last, lastFork)); err != nil {
			t.Fatalf("%s: %v", n.name, err)
		}
		for _, c := range []struct {
			session string
			im      store.Image
		}{{sid, big}, {sid, small}, {fork, big}} {
			got, err := n.st.SessionImage(ctx(t), c.session, c.im.SHA256)
			if err != nil || !bytes.Equal(got.Data, c.im.Data) || got.MediaType != c.im.MediaType || got.Width != c.im.Width {
				t.Errorf("%s: image %.8s of %s: %d bytes, %v", n.name, c.im.SHA256, c.session, len(got.Data), err)
			}
		}
		if _, err := n.st.SessionImage(ctx(t), fork, small.SHA256); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: the fork holds an image it never linked: %v", n.name, err)
		}
		row, err := n.st.Session(ctx(t), sid)
		if err != nil || row.Title != "renamed" || !row.Archived {
			t.Errorf("%s: session %+v, %v", n.name, row, err)
		}
		waiting, err := n.st.QueuedTurnsAsOf(ctx(t), sid, queuedEv.ID)
		if err != nil || len(waiting) != 1 || waiting[0].TurnID != qid || len(waiting[0].Message.Images()) != 1 {
			t.Errorf("%s: the queue as of turn.queued: %+v, %v", n.name, waiting, err)
		}
		if open, err := n.st.OpenQueuedTurns(ctx(t)); err != nil || len(open) != 0 {
			t.Errorf("%s: turns still queued %+v, %v", n.name, open, err)
		}
	}
}

// TestProjectionGoesOnWithoutAnImageTheBucketLacks: a record whose
// image the bucket does not hold (its bytes never put, or gone) is
// applied without it, counted, and the projection goes on with the
// next record.
func TestProjectionGoesOnWithoutAnImageTheBucketLacks(t *testing.T) {
	s := startServer(t)
	a := newReadNode(t, s, "node-a", t.TempDir())
	sid := newSessionID()
	o, g := a.own(t, sid), newEvents(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	publishGroup(t, o, g, sid, event.SessionCreated, "",
		store.CreateSession{Session: store.Session{ID: sid, WorkspacePath: "/w", CreatedAt: now, LastActivityAt: now}})
	gone, kept := imageOf(t, 100), imageOf(t, 100)
	gone.Data = nil // a publish puts only the bytes it has
	publishGroup(t, o, g, sid, event.TurnQueued, "", store.PutImages{SessionID: sid, Images: []store.Image{gone, kept}})
	_, last := publishGroup(t, o, g, sid, event.SessionModeChanged, "", store.Rename{SessionID: sid, Title: "after"})
	if err := a.proj.WaitApplied(ctx(t), last); err != nil {
		t.Fatal(err)
	}
	if n := a.proj.LostImages(); n != 1 {
		t.Errorf("LostImages = %d, want 1", n)
	}
	if _, err := a.st.SessionImage(ctx(t), sid, gone.SHA256); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the missing image: %v, want ErrNotFound", err)
	}
	if got, err := a.st.SessionImage(ctx(t), sid, kept.SHA256); err != nil || !bytes.Equal(got.Data, kept.Data) {
		t.Errorf("the image of the same op the bucket holds: %v", err)
	}
	if row, err := a.st.Session(ctx(t), sid); err != nil || row.Title != "after" {
		t.Errorf("the next record: %+v, %v", row, err)
	}
}
