package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseConfig configures the lease bucket.
type LeaseConfig struct {
	// Bucket is the key-value bucket's name (default metis_leases).
	Bucket string
	// TTL is how long a lease lives without renewal (default 10s): a
	// dead owner's trees are free again at most TTL after its last
	// renewal. At least 1s.
	TTL time.Duration
	// Renew is the renewal interval (default TTL/3).
	Renew time.Duration
	// Replicas of the bucket; 0 picks 3 in a cluster, 1 otherwise.
	Replicas int
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Defaults of LeaseConfig.
const (
	DefaultLeaseBucket = "metis_leases"
	DefaultLeaseTTL    = 10 * time.Second
)

var (
	// ErrLeaseHeld is wrapped when another node holds a tree's lease.
	ErrLeaseHeld = errors.New("cluster: lease held by another node")
	// ErrLeaseLost is the cause of a lease context's cancellation when
	// the lease was taken, expired or could not be renewed in time.
	ErrLeaseLost = errors.New("cluster: lease lost")
	// ErrLeaseReleased is the cause of a lease context's cancellation
	// after Release.
	ErrLeaseReleased = errors.New("cluster: lease released")
)

// Leases hands out the tree leases of one node.
type Leases struct {
	kv   jetstream.KeyValue
	node string
	cfg  LeaseConfig
}

// leaseValue is what a lease key holds.
type leaseValue struct {
	Node string    `json:"node"`
	At   time.Time `json:"acquired_at"`
}

// OpenLeases creates the lease bucket, or updates its configuration, for
// node (a name unique in the cluster).
func OpenLeases(ctx context.Context, js jetstream.JetStream, node string, cfg LeaseConfig) (*Leases, error) {
	if err := ValidToken(node); err != nil {
		return nil, fmt.Errorf("cluster: node name: %w", err)
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultLeaseBucket
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	cfg.TTL = max(cfg.TTL, time.Second)
	if cfg.Renew <= 0 {
		cfg.Renew = cfg.TTL / 3
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = defaultReplicas(js.Conn())
	}
	kvCfg := jetstream.KeyValueConfig{
		Bucket:         cfg.Bucket,
		Description:    "metis: one lease per delegation tree",
		History:        1,
		TTL:            cfg.TTL,
		LimitMarkerTTL: cfg.TTL,
		Storage:        jetstream.FileStorage,
		Replicas:       cfg.Replicas,
	}
	kv, err := createOrUpdateKV(ctx, js, kvCfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: lease bucket %s: %w", cfg.Bucket, err)
	}
	return &Leases{kv: kv, node: node, cfg: cfg}, nil
}

// TTL returns how long a lease lives without renewal.
func (ls *Leases) TTL() time.Duration { return ls.cfg.TTL }

// Node returns the node these leases are taken for.
func (ls *Leases) Node() string { return ls.node }

// Holder returns the node holding tree's lease and its revision, or ""
// if the tree is free.
func (ls *Leases) Holder(ctx context.Context, tree string) (string, uint64, error) {
	e, err := ls.kv.Get(ctx, tree)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return "", 0, nil
	case err != nil:
		return "", 0, fmt.Errorf("cluster: lease of %s: %w", tree, err)
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return "", 0, fmt.Errorf("cluster: lease of %s: %w", tree, err)
	}
	return v.Node, e.Revision(), nil
}

// Lease is a held lease on one tree. Its context is cancelled when the
// lease is lost (cause ErrLeaseLost), released (ErrLeaseReleased) or
// given up by its holder (Lose). A goroutine renews it until then;
// Release stops it.
type Lease struct {
	ls   *Leases
	tree string

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	rev     uint64
	renewed time.Time // when the last successful write was sent

	val      []byte // the lease's value, written again on each renewal
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// Acquire takes tree's lease for this node. If another node holds it,
// the error wraps ErrLeaseHeld. ctx bounds the acquisition only; the
// lease lives until it is lost or released.
func (ls *Leases) Acquire(ctx context.Context, tree string) (*Lease, error) {
	if err := ValidToken(tree); err != nil {
		return nil, err
	}
	val, err := json.Marshal(leaseValue{Node: ls.node, At: time.Now().UTC()})
	if err != nil {
		return nil, fmt.Errorf("cluster: acquire %s: %w", tree, err)
	}
	sent := time.Now()
	rev, err := ls.kv.Create(ctx, tree, val)
	if err != nil {
		// Another node created the key first. A replicated bucket may
		// say so with the stream's own code for a create that lost the
		// race (wrong last sequence) rather than "key exists".
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err) {
			holder, _, _ := ls.Holder(ctx, tree)
			return nil, fmt.Errorf("%w: tree %s, holder %q", ErrLeaseHeld, tree, holder)
		}
		return nil, fmt.Errorf("cluster: acquire %s: %w", tree, err)
	}
	lctx, cancel := context.WithCancelCause(context.Background())
	l := &Lease{ls: ls, tree: tree, ctx: lctx, cancel: cancel, rev: rev, renewed: sent, val: val, stop: make(chan struct{}), done: make(chan struct{})}
	go l.renewLoop()
	return l, nil
}

// Tree returns the leased tree.
func (l *Lease) Tree() string { return l.tree }

// Context is done once the lease is no longer held.
func (l *Lease) Context() context.Context { return l.ctx }

// Revision returns the lease's current revision.
func (l *Lease) Revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// Fresh reports whether the lease's last confirmed renewal (a write the
// bucket stored) was sent less than half its TTL ago, on this
// process's monotonic clock: no other node can have taken it since.
func (l *Lease) Fresh() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Since(l.renewed) < l.ls.cfg.TTL/2
}

// Lose gives the lease up without deleting it (the holder found out it
// may no longer write, e.g. a fenced publish): the context is cancelled
// with cause and renewal stops; the key expires by itself.
func (l *Lease) Lose(cause error) {
	l.cancel(cause)
}

// Renew renews the lease now. A lease found taken or expired is lost:
// its context is cancelled and the error wraps ErrLeaseLost.
func (l *Lease) Renew(ctx context.Context) error {
	if err := context.Cause(l.ctx); err != nil {
		return err
	}
	l.mu.Lock()
	rev, renewed := l.rev, l.renewed
	l.mu.Unlock()
	sent := time.Now()
	next, err := l.ls.kv.Update(ctx, l.tree, l.val, rev)
	switch {
	case err == nil:
		l.mu.Lock()
		l.rev, l.renewed = next, sent
		l.mu.Unlock()
		return nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch) && l.stillOurs(ctx, rev):
		// An earlier renewal was stored but its answer never came back
		// (it timed out on a loaded machine): the key holds this very
		// lease at a newer revision, which is adopted, and renewed.
		return l.Renew(ctx)
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		lost := fmt.Errorf("%w: tree %s: another node took it, or it expired (the key is no longer at revision %d)", ErrLeaseLost, l.tree, rev)
		l.cancel(lost)
		return lost
	case time.Since(renewed) >= l.ls.cfg.TTL:
		// No confirmed renewal for a whole TTL: another node may hold
		// the tree by now.
		lost := fmt.Errorf("%w: tree %s: not renewed for %s: %w", ErrLeaseLost, l.tree, l.ls.cfg.TTL, err)
		l.cancel(lost)
		return lost
	}
	return fmt.Errorf("cluster: renew %s: %w", l.tree, err)
}

// stillOurs reports whether the key holds this lease's own value (the
// node and the time it acquired the lease) at a revision after rev, as
// a renewal that was stored but not acknowledged leaves it; it then
// adopts that revision. Another node's lease, or a later lease of this
// node, holds another value.
//
// The bucket's reads may be served by a replica that has not applied
// the newer revision yet (direct gets): an entry at rev or older is read
// again, a few times.
func (l *Lease) stillOurs(ctx context.Context, rev uint64) bool {
	var e jetstream.KeyValueEntry
	for range staleReads {
		var err error
		if e, err = l.ls.kv.Get(ctx, l.tree); err != nil {
			return false
		}
		if e.Revision() > rev {
			break
		}
		select {
		case <-time.After(staleReadWait):
		case <-ctx.Done():
			return false
		}
	}
	if e.Operation() != jetstream.KeyValuePut || e.Revision() <= rev || !bytes.Equal(e.Value(), l.val) {
		return false
	}
	l.mu.Lock()
	l.rev = e.Revision() // renewed stays the last confirmed renewal's time
	l.mu.Unlock()
	return true
}

// staleReads bounds how often stillOurs reads a key again that a
// replica serves at an older revision, staleReadWait apart.
const (
	staleReads    = 20
	staleReadWait = 25 * time.Millisecond
)

func (l *Lease) renewLoop() {
	defer close(l.done)
	t := time.NewTicker(l.ls.cfg.Renew)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(l.ctx, l.ls.cfg.Renew)
			err := l.Renew(ctx)
			cancel()
			switch {
			case errors.Is(err, ErrLeaseLost):
				// The owner's loss is logged once, where it is handled.
				l.ls.cfg.Logger.Debug("cluster: lease renewal", "tree", l.tree, "node", l.ls.node, "err", err)
			case err != nil:
				l.ls.cfg.Logger.Warn("cluster: lease renewal failed; retrying at the next", "tree", l.tree, "node", l.ls.node, "err", err)
			}
		}
	}
}

// Release stops renewing and deletes the lease (if it still holds the
// revision last written), so another node can take the tree at once.
// Its context is cancelled with ErrLeaseReleased.
func (l *Lease) Release(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	held := l.ctx.Err() == nil
	l.cancel(ErrLeaseReleased)
	if !held {
		return nil
	}
	if err := l.ls.kv.Delete(ctx, l.tree, jetstream.LastRevision(l.Revision())); err != nil &&
		!errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !isWrongLastSeq(err) {
		return fmt.Errorf("cluster: release %s: %w", l.tree, err)
	}
	return nil
}
