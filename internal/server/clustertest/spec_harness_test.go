package clustertest_test

// The three-node harness of the spec §11 suite over a cluster: a
// three-server NATS cluster (JetStream, the stream with three
// replicas) and one metis node connected to each server, plus the
// suite's bindings of internal/streamtest's spec helpers (which the
// single-node suite shares) to a node and this suite's read timeout:
// subscribing a client of a node, reading it, and comparing what it
// saw with what the tree's owner delivered.

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/natstest"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// specRead bounds every frame read of the suite: generous, for a loaded
// 2-core machine running three NATS servers and three metis nodes under
// the race detector. A read that times out is only ever a failure.
const specRead = 30 * time.Second

// trio is three metis nodes, each connected to its own server of a
// three-server NATS cluster. Node 0 creates the suite's sessions, so it
// owns their trees; nodes 1 and 2 serve them through their feeds and
// projections.
type trio struct {
	t     *testing.T
	nats  *natstest.Cluster
	nodes [3]*servertest.Harness
	opts  []servertest.Option
}

var trioNames = [3]string{"node-0", "node-1", "node-2"}

// startTrio starts the NATS cluster and the three nodes, with opts
// applied to each node's configuration, and checks that the nodes
// created the stream with three replicas. Everything stops when the
// test ends (the nodes first).
func startTrio(t *testing.T, opts ...servertest.Option) *trio {
	t.Helper()
	tr := &trio{t: t, nats: natstest.StartCluster(t, 3), opts: opts}
	for i := range tr.nodes {
		tr.nodes[i] = tr.start(i, "")
	}
	tr.checkReplicas()
	return tr
}

// start starts node i on home ("" for a fresh one), connected to the
// i-th NATS server only.
func (tr *trio) start(i int, home string) *servertest.Harness {
	tr.t.Helper()
	opts := append([]servertest.Option{func(c *config.Config) {
		c.NATS = tr.nats.Servers[i].URL
		c.Node = trioNames[i]
		c.DemoDelay = time.Millisecond
	}}, tr.opts...)
	return servertest.Start(tr.t, home, opts...)
}

// restart stops node i and starts it again on home ("" keeps its own).
func (tr *trio) restart(i int, home string) *servertest.Harness {
	tr.t.Helper()
	if home == "" {
		home = tr.nodes[i].Home
	}
	tr.nodes[i].Stop()
	tr.nodes[i] = tr.start(i, home)
	return tr.nodes[i]
}

// checkReplicas fails unless the event stream has three replicas, on
// three servers.
func (tr *trio) checkReplicas() {
	t := tr.t
	t.Helper()
	_, js := natstest.Connect(t, tr.nats.URLs())
	ctx, cancel := context.WithTimeout(t.Context(), specRead)
	defer cancel()
	st, err := js.Stream(ctx, cluster.DefaultStream)
	servertest.Must(t, err)
	info, err := st.Info(ctx)
	servertest.Must(t, err)
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream %s: %d replicas configured, cluster %+v; want 3 on three servers", cluster.DefaultStream, info.Config.Replicas, info.Cluster)
	}
}

// owner is the node that owns the suite's trees.
func (tr *trio) owner() *servertest.Harness { return tr.nodes[0] }

// session creates a session on the owner and waits until every node's
// projection shows it.
func (tr *trio) session() string {
	tr.t.Helper()
	sid := tr.owner().CreateSession()
	for _, h := range tr.nodes[1:] {
		eventually(tr.t, "the session on "+h.Config.Node, func() bool {
			return h.Do(http.MethodGet, "/sessions/"+sid, nil, nil) == http.StatusOK
		})
	}
	return sid
}

// eventually polls cond until it holds, failing after specRead: what a
// node's projection or feed shows follows the log, and on a loaded
// machine a replica or a consumer can lag by seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(specRead)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// subscribe connects a client of node h over tr, subscribes, and reads
// the ack (and the snapshot when asked for one); it fails on a
// subscribe_error.
func subscribe(t *testing.T, tr streamtest.Transport, h *servertest.Harness, sid string, filter any, since *string, snapshot bool) (streamtest.Conn, *protocol.SubscribeAck, *protocol.Snapshot) {
	t.Helper()
	return streamtest.Subscribe(t, tr, h.URL, sid, specRead, filter, since, snapshot)
}

// subscribeOn subscribes a connected client and reads the ack and, if
// asked for, the snapshot.
func subscribeOn(t *testing.T, c streamtest.Conn, filter any, since *string, snapshot bool) (*protocol.SubscribeAck, *protocol.Snapshot) {
	t.Helper()
	return streamtest.SubscribeOn(t, c, specRead, filter, since, snapshot)
}

// subscribeRefused subscribes and expects a subscribe_error (on SSE,
// with the HTTP status of its code).
func subscribeRefused(t *testing.T, c streamtest.Conn, filter any, since *string) *protocol.SubscribeError {
	t.Helper()
	return streamtest.SubscribeRefused(t, c, specRead, filter, since, false)
}

// nextFrame reads the next frame that is not a ping or pong.
func nextFrame(t *testing.T, c streamtest.Conn) streamtest.Frame {
	t.Helper()
	return streamtest.NextFrame(t, c, specRead)
}

// readUntil reads event frames up to and including the first event of
// type typ of turn, and returns them with their raw frames.
func readUntil(t *testing.T, c streamtest.Conn, typ event.Type, turn string) ([]*protocol.EventEnvelope, [][]byte) {
	t.Helper()
	var evs []*protocol.EventEnvelope
	var raw [][]byte
	match := streamtest.UntilType(typ, turn)
	for {
		f := nextFrame(t, c)
		if f.Event == nil {
			t.Fatalf("%s client: want an event, got %s", c.Transport(), f.Raw)
		}
		evs, raw = append(evs, f.Event), append(raw, f.Raw)
		if match(f.Event) {
			return evs, raw
		}
	}
}

// ownerDelivered returns the events the owner delivered for a session
// with after < id <= upTo whose type is in set (nil: all). It first
// waits until the owner's recorder has upTo: a client can read an event
// before the recorder, a later live sink, has it.
func (tr *trio) ownerDelivered(sid, after, upTo string, set map[string]bool) []*event.Event {
	tr.t.Helper()
	h := tr.owner()
	eventually(tr.t, "the owner's recorder to catch up", func() bool {
		evs := h.Live.Events(sid)
		return len(evs) > 0 && evs[len(evs)-1].ID >= upTo
	})
	return streamtest.Between(h.Live.Events(sid), after, upTo, set)
}

// sameAsOwner fails unless a client's events are exactly what the
// owner delivered in (after, the client's last event] with the
// filter's types.
func (tr *trio) sameAsOwner(what, sid, after string, got []*protocol.EventEnvelope, set map[string]bool) {
	tr.t.Helper()
	if len(got) == 0 {
		tr.t.Fatalf("%s: no events", what)
	}
	streamtest.SameIDs(tr.t, what+" vs the owner", got, tr.ownerDelivered(sid, after, got[len(got)-1].ID, set))
}

// rawGET returns the body of a GET on node h, failing unless it is 200.
func rawGET(t *testing.T, h *servertest.Harness, path string) []byte {
	t.Helper()
	var raw json.RawMessage
	if st := h.Do(http.MethodGet, path, nil, &raw); st != http.StatusOK {
		t.Fatalf("GET %s on %s: %d %s", path, h.Config.Node, st, raw)
	}
	return raw
}

// ptr returns a pointer to s.
func ptr(s string) *string { return &s }
