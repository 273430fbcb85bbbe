package feed

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestClients: Close refuses new clients, closes Shutdown, and returns
// only once every admitted client has left, or when its context ends.
func TestClients(t *testing.T) {
	c := NewClients()
	if !c.Join() {
		t.Fatal("an open set refused a client")
	}
	select {
	case <-c.Shutdown():
		t.Fatal("Shutdown closed before Close")
	default:
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a client still served: %v, want the context's error", err)
	}
	<-c.Shutdown()
	if c.Context().Err() == nil {
		t.Fatal("Context not cancelled by Close")
	}
	if c.Join() {
		t.Fatal("a closed set admitted a client")
	}

	left := make(chan struct{})
	go func() {
		<-c.Shutdown()
		close(left)
		c.Leave()
	}()
	if err := c.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-left:
	default:
		t.Fatal("Close returned before the client left")
	}
}
