package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// TestRetentionKeepsLiveConversations: pruning to a cutoff between two
// turns of a session removes a session idle since before it, deletes
// the first turn's events, but keeps the live session's whole
// conversation: its next turn runs with every earlier message, and a
// client still attaches with a snapshot.
func TestRetentionKeepsLiveConversations(t *testing.T) {
	h := servertest.Start(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live := h.CreateSession()
	h.Submit(live, "/echo one")
	h.WaitTurn(live)
	idle := h.CreateSession()
	if em, ok := h.Server.Bus.Lookup(idle); ok {
		servertest.Must(t, em.Barrier(ctx))
	}
	cutoff := time.Now()
	servertest.WaitFor(t, "the clock to pass the cutoff", func() bool { return time.Now().After(cutoff.Add(2 * time.Millisecond)) })
	h.Submit(live, "/echo two")
	h.WaitTurn(live)

	r, err := h.Server.Store.Prune(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sessions != 1 || r.Events == 0 {
		t.Fatalf("Prune = %+v, want the idle session and the first turn's events", r)
	}
	if st := h.Do("GET", "/sessions/"+idle, nil, nil); st != http.StatusNotFound {
		t.Fatalf("GET the pruned session: %d, want 404", st)
	}
	before, err := h.Server.Sessions.Conversation(ctx, live)
	if err != nil || len(before) != 4 {
		t.Fatalf("conversation after pruning: %d messages, %v; want 4", len(before), err)
	}

	h.Submit(live, "/echo three")
	h.WaitTurn(live)
	after, err := h.Server.Sessions.Conversation(ctx, live)
	if err != nil || len(after) != 6 {
		t.Fatalf("conversation after a new turn: %d messages, %v; want 6", len(after), err)
	}
	for i := range before {
		if after[i].ID != before[i].ID {
			t.Fatalf("message %d changed: %s, was %s", i, after[i].ID, before[i].ID)
		}
	}
	att, serr := h.Server.Hub.Subscribe(ctx, live, &protocol.Subscribe{Preset: event.PresetChat, Snapshot: true})
	if serr != nil {
		t.Fatalf("snapshot after pruning: %+v", serr)
	}
	h.Server.Hub.Unsubscribe(att.Client)
}
