package clusternode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/natstest"
)

// routeFixture is a forwarding node (node-c) and the owner's answers
// to a tree's submits, on one NATS server: each submit the owner gets
// is counted and waits until gate closes (whatever becomes of its
// lease: the caller's wait must end on its own).
type routeFixture struct {
	cn       *Node
	leases   map[string]*cluster.Leases // by node name: node-a, node-b
	watch    *cluster.LeaseWatcher      // node-c's lease watch, read by the test (a lagging watch)
	calls    atomic.Int32
	received chan struct{}
	gate     chan struct{}
	opened   sync.Once
}

// open lets the owner's submits answer.
func (f *routeFixture) open() { f.opened.Do(func() { close(f.gate) }) }

const routeTree = "sess_route_fixture"

func newRouteFixture(t *testing.T) *routeFixture {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv.URL)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func(node string) *cluster.Leases {
		ls, err := cluster.OpenLeases(ctx, js, node, cluster.LeaseConfig{TTL: time.Minute, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	f := &routeFixture{leases: map[string]*cluster.Leases{"node-a": open("node-a"), "node-b": open("node-b")},
		received: make(chan struct{}, 16), gate: make(chan struct{})}
	f.cn = &Node{name: "node-c", logger: logger, nc: nc, leases: open("node-c"), router: cluster.NewRouter(nc, 0, logger)}
	wctx, wcancel := context.WithCancel(context.Background())
	var err error
	if f.watch, err = f.cn.leases.Watch(wctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.open)
	t.Cleanup(func() {
		wcancel()
		_ = f.watch.Stop()
	})
	return f
}

// serve answers the tree's routed submits as node, until the test ends.
func (f *routeFixture) serve(t *testing.T, lease *cluster.Lease) {
	t.Helper()
	hs := cluster.Handlers{}
	cluster.Handle(hs, cluster.KindSubmit, func(context.Context, string, cluster.SubmitRequest) (cluster.SubmitReply, error) {
		n := f.calls.Add(1)
		f.received <- struct{}{}
		<-f.gate // a slow owner: only the test ends the wait
		return cluster.SubmitReply{TurnID: fmt.Sprintf("turn_%d", n)}, nil
	})
	s, err := cluster.NewRouter(f.cn.nc, 0, f.cn.logger).Serve(lease.Context(), routeTree, hs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
}

// acquire takes the tree's lease as node.
func (f *routeFixture) acquire(t *testing.T, node string) *cluster.Lease {
	t.Helper()
	l, err := f.leases[node].Acquire(t.Context(), routeTree)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

// release gives a lease up.
func release(t *testing.T, l *cluster.Lease) {
	t.Helper()
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// changes reads the next n lease changes node-c's watch has.
func (f *routeFixture) changes(t *testing.T, n int) []cluster.LeaseChange {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out []cluster.LeaseChange
	for range n {
		c, err := f.watch.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// forward sends a submit from node-c and returns its result.
func (f *routeFixture) forward(t *testing.T) (chan error, *cluster.SubmitReply) {
	t.Helper()
	rep := new(cluster.SubmitReply)
	errc := make(chan error, 1)
	go func() {
		errc <- f.cn.Forward(t.Context(), routeTree, cluster.KindSubmit.Verb,
			cluster.SubmitRequest{SessionID: routeTree, Content: "next"}, rep)
	}()
	select {
	case <-f.received:
	case <-time.After(20 * time.Second):
		t.Fatal("the owner never got the submit")
	}
	return errc, rep
}

func waitErr(t *testing.T, errc chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the routed request never returned")
		return nil
	}
}

// TestRoutedRequestIsNotSentAgainForALeaseChangeSeenLate: a node whose
// lease watch lags reports the previous owner's lease and its expiry
// after it read the new owner's lease and sent a submit there. Those
// changes are older than the lease the request was sent by: the owner
// carries the submit out once, and the node answers with its turn (a
// second copy would be refused turn_in_flight by the first).
func TestRoutedRequestIsNotSentAgainForALeaseChangeSeenLate(t *testing.T) {
	f := newRouteFixture(t)
	// node-a's lease, its end, node-b's: not yet seen by the node. Each
	// change is read before the next is made: the bucket keeps one
	// value per tree, so a watch may skip a change the next one
	// replaced before the server delivered it.
	a := f.acquire(t, "node-a") // the dead owner's lease, gone
	late := f.changes(t, 1)
	release(t, a)
	late = append(late, f.changes(t, 1)...)
	b := f.acquire(t, "node-b")
	late = append(late, f.changes(t, 1)...)
	if late[0].Holder != "node-a" || late[1].Holder != "" || late[2].Holder != "node-b" {
		t.Fatalf("the watch reported %+v; want node-a's lease, its end, node-b's", late)
	}
	f.serve(t, b)

	errc, rep := f.forward(t)
	for _, c := range late {
		f.cn.leaseChanged(c)
	}
	f.open()
	if err := waitErr(t, errc); err != nil {
		t.Fatal(err)
	}
	if n := f.calls.Load(); n != 1 || rep.TurnID != "turn_1" {
		t.Fatalf("the owner carried the submit out %d times; the reply names %q, want once, turn_1", n, rep.TurnID)
	}
}

// TestRoutedRequestStopsWaitingWhenTheLeaseMovesAfterIt: a change of
// the lease after the one the request was sent by (its holder gave it
// up) still ends the wait at once, and the request then finds no owner.
func TestRoutedRequestStopsWaitingWhenTheLeaseMovesAfterIt(t *testing.T) {
	f := newRouteFixture(t)
	b := f.acquire(t, "node-b")
	f.changes(t, 1)
	f.serve(t, b)

	errc, _ := f.forward(t)
	release(t, b)
	for _, c := range f.changes(t, 1) {
		f.cn.leaseChanged(c)
	}
	if err := waitErr(t, errc); !errors.Is(err, cluster.ErrNoOwner) {
		t.Fatalf("got %v, want cluster.ErrNoOwner", err)
	}
	f.open()
}

// TestALeaseChangeSeenBeforeTheReadIsJudgedByIt: a change the lease
// watch reports between the registration of a request's waiter and its
// read of the lease (the holder's own renewal, every third of the TTL;
// the previous owner's expiry, seen late) is judged against that read:
// it does not end the wait for the holder the request goes to. One
// after the read that leaves the lease free does.
func TestALeaseChangeSeenBeforeTheReadIsJudgedByIt(t *testing.T) {
	cn := &Node{name: "node-c"}
	const tree = "sess_window"
	moved := func(w *leaseWaiter) bool {
		select {
		case <-w.moved:
			return true
		default:
			return false
		}
	}
	for _, c := range []cluster.LeaseChange{
		{Tree: tree, Holder: "node-b", Revision: 38}, // the holder's renewal, the one the read returns
		{Tree: tree, Holder: "", Revision: 4},        // the dead owner's expiry, seen late
		{Tree: tree, Holder: "node-a", Revision: 3},  // its last renewal, seen later still
	} {
		w := cn.watchLease(tree)
		cn.leaseChanged(c)
		w.address("node-b", 38)
		if moved(w) {
			t.Fatalf("%+v, seen before a read of node-b's lease at revision 38, ended the wait", c)
		}
		cn.leaseChanged(cluster.LeaseChange{Tree: tree, Holder: "node-b", Revision: 39})
		if moved(w) {
			t.Fatal("node-b's renewal after the read ended the wait")
		}
		cn.leaseChanged(cluster.LeaseChange{Tree: tree, Holder: "", Revision: 40})
		if !moved(w) {
			t.Fatal("the lease's expiry after the read did not end the wait")
		}
		w.stop()
	}
	if len(cn.waiters) != 0 {
		t.Fatalf("waiters left registered: %v", cn.waiters)
	}
}
