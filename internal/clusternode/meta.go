package clusternode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/protocol"
)

// Meta-events of this node's clients of trees owned elsewhere
// (docs/scale-out.md, "Meta-events of every node's clients"). Only a
// tree's owner emits into it, so the hub hands the meta-events it may
// not emit (Config.Forward: a subscription registered or unregistered,
// a slow client's warning) to the node's metaForwarder, which asks the
// owner to emit them (metis.rpc.<tree>.meta). A tree nobody owns is
// taken by this node, which emits them itself, as a routed feedback
// does.
//
// The hub calls Forward while it delivers events (a slow client), so
// Forward only queues: a few queues, a session's meta-events always in
// the same one, each sent in order by one goroutine, one request at a
// time, each bounded by metaTimeout. A full queue drops the event
// (counted, logged); a request that fails is counted and logged, never
// retried (a retry could land after the session's next meta-event).

// Bounds of the routed meta-events.
const (
	metaShards  = 4               // queues, each with its goroutine
	metaQueue   = 256             // meta-events waiting per queue
	metaTimeout = 5 * time.Second // one meta-event's request (taking a tree: takeTimeout)
	// metaLogEvery spaces the log lines about dropped meta-events.
	metaLogEvery = 10 * time.Second
)

// metaJob is one meta-event to have emitted.
type metaJob struct {
	sessionID string
	typ       event.Type
	payload   map[string]any
}

// metaForwarder sends this node's meta-events of trees owned elsewhere
// to their owners, with emit (Node.sendMeta), counting each
// result with count.
type metaForwarder struct {
	emit   func(ctx context.Context, job metaJob) (result string, err error)
	count  func(result string)
	log    *slog.Logger
	ctx    context.Context // cancelled when close gives up waiting
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.RWMutex // guards closed against sends on closed queues
	closed bool
	queues [metaShards]chan metaJob

	pendingMu sync.Mutex
	pending   map[string]int // meta-events queued or being sent, by session

	stopLog    sync.Once    // one line for what close gives up on
	dropped    atomic.Int64 // dropped since the last log line
	lastLogged atomic.Int64 // unix nanoseconds of the last log line
}

// newMetaForwarder starts the forwarder's goroutines; close stops them.
func newMetaForwarder(log *slog.Logger, emit func(context.Context, metaJob) (string, error), count func(string)) *metaForwarder {
	ctx, cancel := context.WithCancel(context.Background())
	f := &metaForwarder{emit: emit, count: count, log: log, ctx: ctx, cancel: cancel, pending: map[string]int{}}
	for i := range f.queues {
		q := make(chan metaJob, metaQueue)
		f.queues[i] = q
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for job := range q {
				f.send(job)
				f.settle(job.sessionID, -1)
			}
		}()
	}
	return f
}

// forward queues a meta-event of sessionID without blocking; a full
// queue, or a forwarder that is closing, drops it.
func (f *metaForwarder) forward(sessionID string, typ event.Type, payload map[string]any) {
	f.settle(sessionID, +1) // before the worker can see it
	f.mu.RLock()
	queued := false
	if !f.closed {
		select {
		case f.queues[shardOf(sessionID)] <- metaJob{sessionID: sessionID, typ: typ, payload: payload}:
			queued = true
		default:
		}
	}
	f.mu.RUnlock()
	if !queued {
		f.settle(sessionID, -1)
		f.drop(sessionID, typ)
	}
}

// shardOf is the queue of a session's meta-events (FNV-1a, without
// allocating).
func shardOf(sessionID string) int {
	h := uint32(2166136261)
	for i := 0; i < len(sessionID); i++ {
		h ^= uint32(sessionID[i])
		h *= 16777619
	}
	return int(h % metaShards)
}

// settle counts a session's meta-events queued or being sent.
func (f *metaForwarder) settle(sessionID string, delta int) {
	f.pendingMu.Lock()
	defer f.pendingMu.Unlock()
	if n := f.pending[sessionID] + delta; n > 0 {
		f.pending[sessionID] = n
	} else {
		delete(f.pending, sessionID)
	}
}

// holds reports whether meta-events of the session are queued or being
// sent: a later one must follow them through the queue, even if this
// node may now emit into the session itself (it took the tree).
func (f *metaForwarder) holds(sessionID string) bool {
	f.pendingMu.Lock()
	defer f.pendingMu.Unlock()
	return f.pending[sessionID] > 0
}

// drop counts a meta-event that could not be queued, and logs it,
// at most once per metaLogEvery with the number dropped since.
func (f *metaForwarder) drop(sessionID string, typ event.Type) {
	f.count(metrics.MetaDropped)
	f.dropped.Add(1)
	now := time.Now().UnixNano()
	last := f.lastLogged.Load()
	if now-last < int64(metaLogEvery) || !f.lastLogged.CompareAndSwap(last, now) {
		return
	}
	n := f.dropped.Swap(0)
	f.log.Warn("cluster: meta-events of clients of trees owned elsewhere dropped (queue full, or the node is stopping)",
		"dropped", n, "session", sessionID, "type", typ)
}

// send has one meta-event emitted with emit (which bounds its steps)
// and counts the result; it never retries.
func (f *metaForwarder) send(job metaJob) {
	result, err := f.emit(f.ctx, job)
	f.count(result)
	if err != nil && f.ctx.Err() != nil {
		// close gave up waiting: the rest fail at once, logged once.
		f.stopLog.Do(func() { f.log.Warn("cluster: meta-events of clients not sent before the node stopped", "err", err) })
	} else if err != nil {
		f.log.Warn("cluster: meta-event of a client not emitted", "session", job.sessionID, "type", job.typ,
			"subscription", job.payload["subscription_name"], "err", err)
	}
}

// sendMeta has one meta-event of a client of this node emitted into
// its tree: by the tree's owner (the request bounded by metaTimeout),
// or by this node if it owns the tree or nobody does (it takes the
// tree then, within takeTimeout, as failover does). It returns the
// result to count, and why it failed.
func (cn *Node) sendMeta(ctx context.Context, job metaJob) (string, error) {
	payload, err := json.Marshal(job.payload)
	if err != nil {
		return metrics.MetaFailed, fmt.Errorf("payload: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	tree, err := cn.treeOf(rctx, job.sessionID)
	if err != nil {
		return metrics.MetaFailed, err
	}
	if !cn.owns(tree) {
		var rep cluster.MetaReply
		err := cn.Forward(rctx, tree, cluster.KindMeta.Verb, cluster.MetaRequest{SessionID: job.sessionID, Type: string(job.typ), Payload: payload}, &rep)
		switch {
		case err == nil:
			return metrics.MetaRouted, nil
		case !errors.Is(err, cluster.ErrNoOwner):
			return metrics.MetaFailed, err
		case cn.fo.ctx.Err() != nil:
			return metrics.MetaFailed, fmt.Errorf("%w (this node is stopping: it takes no tree)", err)
		}
		// Nobody owns the tree: take it, as a routed request does.
		tctx, cancel := context.WithTimeout(ctx, takeTimeout)
		defer cancel()
		if err := cn.Take(tctx, tree); err != nil {
			return metrics.MetaFailed, fmt.Errorf("no owner, and taking the tree: %w", err)
		}
	}
	if _, err := cn.emitMeta(ctx, job.sessionID, job.typ, payload); err != nil {
		return metrics.MetaFailed, err
	}
	return metrics.MetaLocal, nil
}

// close stops taking meta-events and sends those queued, until ctx is
// done; what is left then is dropped.
func (f *metaForwarder) close(ctx context.Context) error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		for _, q := range f.queues {
			close(q)
		}
	}
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	defer f.cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		f.cancel() // the requests in flight end, the rest fail at once
		<-done
		return fmt.Errorf("cluster: meta-events: %w", ctx.Err())
	}
}

// emitMeta emits a meta-event into a session of a tree this node owns,
// without waiting for its commit, and returns its id.
func (cn *Node) emitMeta(ctx context.Context, sessionID string, typ event.Type, payload json.RawMessage) (string, error) {
	em, err := cn.bus.Emitter(ctx, sessionID)
	if err != nil {
		return "", err
	}
	ev, err := em.Emit(bus.Spec{Type: typ, Actor: event.ActorBus, Payload: payload})
	if err != nil {
		return "", err
	}
	return ev.ID, nil
}

// Meta implements cluster.Handler: a meta-event of another node's
// client, which this node emits as the tree's owner.
func (cn *Node) Meta(ctx context.Context, tree string, req cluster.MetaRequest) (cluster.MetaReply, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return cluster.MetaReply{}, err
	}
	id, err := cn.emitMeta(ctx, req.SessionID, event.Type(req.Type), req.Payload)
	if errors.Is(err, bus.ErrClosed) { // stopping, or the tree was lost
		return cluster.MetaReply{}, &cluster.RemoteError{Code: protocol.CodeShuttingDown, Message: err.Error()}
	}
	if err != nil {
		return cluster.MetaReply{}, err
	}
	if req.Type == string(event.BusHandlerWarning) {
		var p struct {
			Subscription string `json:"subscription_name"`
			Reason       string `json:"reason"`
		}
		_ = json.Unmarshal(req.Payload, &p) // checked by the decoder
		cn.logger.Warn("bus handler warning of another node's client", "session", req.SessionID,
			"subscription", p.Subscription, "reason", p.Reason)
	}
	return cluster.MetaReply{EventID: id}, nil
}

// countMeta counts a meta-event's result.
func (cn *Node) countMeta(result string) {
	if cn.status != nil {
		cn.status.metrics.MetaEvent(result)
	}
}

// HubEmits is the hub's Config.Emits: the owner of a session's tree
// emits its clients' meta-events itself, unless earlier ones of the
// session still wait in the forwarder's queue (the node took the tree
// meanwhile): the later ones then follow them there, in order.
func (cn *Node) HubEmits(sessionID string) bool {
	if m := cn.meta; m != nil && m.holds(sessionID) {
		return false
	}
	return cn.Emits(sessionID)
}

// ForwardMeta is the hub's Config.Forward: the tree's owner emits the
// meta-events of this node's clients.
func (cn *Node) ForwardMeta(sessionID string, typ event.Type, payload map[string]any) {
	if cn.meta != nil {
		cn.meta.forward(sessionID, typ, payload)
	}
}
