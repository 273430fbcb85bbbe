package natstest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestClusterHoldsAStreamWithThreeReplicas: a stream of three replicas
// is created on the cluster, and a message published through one server
// is read through another, and still after its first server stops.
func TestClusterHoldsAStreamWithThreeReplicas(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	pub := connect(t, c.Servers[0].URL)
	js, err := jetstream.New(pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3}); err != nil {
		t.Fatalf("create stream R3: %v", err)
	}
	if _, err := js.Publish(ctx, "t.a", []byte("hello")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	c.Servers[0].Shutdown()

	sub := connect(t, c.Servers[2].URL)
	js2, err := jetstream.New(sub)
	if err != nil {
		t.Fatal(err)
	}
	// The stopped server may have led the stream or the cluster's
	// JetStream: a request sent before a new leader is elected gets no
	// answer, so each attempt has a short deadline of its own.
	var msg *jetstream.RawStreamMsg
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := js2.Stream(actx, "T")
		if err == nil {
			msg, err = s.GetMsg(actx, 1)
		}
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("read the message after a server stopped: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if string(msg.Data) != "hello" {
		t.Fatalf("message %q, want hello", msg.Data)
	}
	if urls := strings.Split(c.URLs(), ","); len(urls) != 3 || urls[2] != c.Servers[2].URL {
		t.Fatalf("URLs() = %q, want the three servers' client URLs", c.URLs())
	}
}

func TestStartServesJetStream(t *testing.T) {
	s := natstest.Start(t)
	nc := connect(t, s.URL)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(t.Context()); err != nil {
		t.Fatalf("jetstream: %v", err)
	}
}

func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
