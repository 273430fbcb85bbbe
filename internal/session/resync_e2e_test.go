package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
)

// TestClientResyncsAfterALostEvent: a client following a session over
// the WebSocket stream while a storage failure loses one of the turn's
// events is closed for resync, reconnects with its cursor, and sees the
// turn end (failed, storage_error) instead of waiting forever.
func TestClientResyncsAfterALostEvent(t *testing.T) {
	h := servertest.Start(t, "", slow)
	sid := h.CreateSession()
	c := client.New(h.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var (
		mu         sync.Mutex
		subscribed = make(chan struct{}, 8)
		reconnects int
		turn       client.Turn
	)
	ended := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- c.Follow(ctx, sid, client.FollowOptions{Filter: "preset:full", MinBackoff: 10 * time.Millisecond,
			OnUpdate: func(u client.Update) {
				mu.Lock()
				defer mu.Unlock()
				switch u.Kind {
				case client.Subscribed:
					select {
					case subscribed <- struct{}{}:
					default:
					}
				case client.Reconnecting:
					reconnects++
				}
				turn = u.View.Turn
				if turn.Status == "failed" || turn.Status == "completed" {
					once.Do(func() { close(ended) })
				}
			}})
	}()
	<-subscribed
	h.Server.Store.SetFault(store.FailMatching(2, func(ops []store.Op) bool { return store.HasEvent(ops, event.LLMCallCompleted) }))
	h.Submit(sid, "/echo hello there")
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the client never saw the turn end")
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if turn.Status != "failed" || turn.Reason != "storage_error" {
		t.Errorf("the client's turn %+v, want failed storage_error", turn)
	}
	if reconnects == 0 {
		t.Error("the client was not made to resync")
	}
}
