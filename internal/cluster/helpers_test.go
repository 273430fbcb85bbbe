package cluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// liveRenew is how often a live node renews its leases in the tests
// whose bucket has the shortest TTL (1 s), so another node's paused
// lease expires soon: ten renewals a TTL, so a renewal delayed on a
// loaded machine does not lose a lease the test needs held.
const liveRenew = 100 * time.Millisecond

// startServer runs an in-process NATS server with JetStream on a
// temporary directory; it shuts down when the test ends.
func startServer(t testing.TB) *server.Server {
	t.Helper()
	return natstest.Start(t).Server
}

// connect opens a client connection to s, drained when the test ends
// (registered after the server's cleanup, so it runs first).
func connect(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	closed := make(chan struct{})
	nc, err := nats.Connect(s.ClientURL(), nats.InProcessServer(s), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		if err := nc.Drain(); err != nil {
			nc.Close()
		}
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Error("nats connection did not close")
		}
	})
	return nc
}

func openLog(t testing.TB, nc *nats.Conn, cfg cluster.LogConfig) *cluster.Log {
	t.Helper()
	l, err := cluster.OpenLog(ctx(t), nc, cfg)
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	return l
}

func ctx(t testing.TB) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// events hands out sealed events of one tree in id order, as the
// tree's emitter would.
type events struct {
	t         *testing.T
	seq       *event.Sequencer
	published []*event.Event // what publishTurn published
}

func newEvents(t *testing.T) *events {
	seq, err := event.NewSequencer("", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &events{t: t, seq: seq}
}

func (g *events) make(session string, typ event.Type, turn string, payload any) *event.Event {
	g.t.Helper()
	id, ts := g.seq.Next()
	b, err := json.Marshal(payload)
	if err != nil {
		g.t.Fatal(err)
	}
	ev := &event.Event{ID: id, Type: typ, SessionID: session, TurnID: turn, TS: ts, Actor: event.ActorAgent, Payload: b}
	if err := ev.Seal(); err != nil {
		g.t.Fatal(err)
	}
	return ev
}

func newSessionID() string { return event.NewID("sess_") }
