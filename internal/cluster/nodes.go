package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// NodesConfig configures the node directory: a key-value bucket where
// each node announces itself.
type NodesConfig struct {
	// Bucket is the key-value bucket's name (default metis_nodes).
	Bucket string
	// TTL is how long an announcement lives without a heartbeat
	// (default 15s, at least 1s): a node that died leaves the directory
	// at most TTL after its last heartbeat.
	TTL time.Duration
	// Heartbeat is the interval of the announcement's refresh (default
	// TTL/5). Each heartbeat also carries how far the node's projection
	// applied the log, so other nodes can tell its lag.
	Heartbeat time.Duration
	// Replicas of the bucket; 0 picks 3 in a cluster, 1 otherwise.
	Replicas int
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Defaults of NodesConfig.
const (
	DefaultNodesBucket = "metis_nodes"
	DefaultNodesTTL    = 15 * time.Second
)

// NodeInfo is what a node announces about itself.
type NodeInfo struct {
	Name string `json:"name"`
	// Address is the node's HTTP base URL, "" until it listens.
	Address string    `json:"address,omitempty"`
	Started time.Time `json:"started"`
	Version string    `json:"version,omitempty"`
	// Applied is the stream sequence the node's projection had applied
	// through at Heartbeat.
	Applied   uint64    `json:"applied_seq"`
	Heartbeat time.Time `json:"heartbeat"`
}

// Nodes is the node directory of the cluster.
type Nodes struct {
	kv  jetstream.KeyValue
	cfg NodesConfig
}

// OpenNodes creates the node directory's bucket, or updates its
// configuration.
func OpenNodes(ctx context.Context, js jetstream.JetStream, cfg NodesConfig) (*Nodes, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultNodesBucket
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultNodesTTL
	}
	cfg.TTL = max(cfg.TTL, time.Second)
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = cfg.TTL / 5
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = defaultReplicas(js.Conn())
	}
	kv, err := createOrUpdateKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "metis: the nodes of the cluster, one key per node, refreshed by heartbeats",
		History:     1,
		TTL:         cfg.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: nodes bucket %s: %w", cfg.Bucket, err)
	}
	return &Nodes{kv: kv, cfg: cfg}, nil
}

// Config returns the directory's configuration, defaults filled in.
func (n *Nodes) Config() NodesConfig { return n.cfg }

// staleAfter is how long after its last heartbeat, by the NATS server's
// timestamp, List leaves out an announcement the server has not expired
// yet: NATS expires a bucket's keys on a timer that a loaded server can
// run many seconds late. It is twice the TTL (at least 5 s more), so a
// clock of this node's ahead of the server's by less than that never
// hides a live node.
func (n *Nodes) staleAfter() time.Duration {
	return n.cfg.TTL + max(n.cfg.TTL, 5*time.Second)
}

// List returns the nodes announced now (those whose last heartbeat is
// younger than the TTL, as NATS expires them; one the server has not
// expired long after, staleAfter, is left out too), by name. An
// announcement that does not decode is skipped and logged.
func (n *Nodes) List(ctx context.Context) ([]NodeInfo, error) {
	entries, _, err := readBucket(ctx, n.kv, 0)
	if err != nil {
		return nil, fmt.Errorf("cluster: list nodes: %w", err)
	}
	out := make([]NodeInfo, 0, len(entries))
	for _, e := range entries {
		if time.Since(e.Created()) > n.staleAfter() {
			continue
		}
		var ni NodeInfo
		if err := json.Unmarshal(e.Value(), &ni); err != nil || ni.Name != e.Key() {
			n.cfg.Logger.Warn("cluster: skipping a bad node announcement", "key", e.Key(), "err", err)
			continue
		}
		out = append(out, ni)
	}
	slices.SortFunc(out, func(a, b NodeInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Announcement is this node's entry in the directory, refreshed by a
// heartbeat until Stop.
type Announcement struct {
	nodes   *Nodes
	applied func() uint64

	mu   sync.Mutex
	info NodeInfo
	rev  uint64 // revision of the last successful put

	wake chan struct{} // one slot: put now (the address changed)
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

// Announce puts info in the directory (Heartbeat and Applied are filled
// in on each put, Applied from applied) and refreshes it every
// heartbeat until Stop. It warns when another process announced the
// same name less than a TTL ago: a restart of this node, or two nodes
// given one --node.
func (n *Nodes) Announce(ctx context.Context, info NodeInfo, applied func() uint64) (*Announcement, error) {
	if err := ValidToken(info.Name); err != nil {
		return nil, fmt.Errorf("cluster: node name: %w", err)
	}
	if e, err := n.kv.Get(ctx, info.Name); err == nil {
		var prev NodeInfo
		if json.Unmarshal(e.Value(), &prev) == nil && !prev.Started.Equal(info.Started) {
			n.cfg.Logger.Warn("cluster: another process announced this node name recently (a restart of this node, or two nodes with one --node)",
				"node", info.Name, "its_address", prev.Address, "its_heartbeat", prev.Heartbeat)
		}
	}
	a := &Announcement{nodes: n, applied: applied, info: info,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if err := a.put(ctx); err != nil {
		return nil, err
	}
	go a.loop()
	return a, nil
}

// SetAddress records the node's HTTP address and announces it at once.
func (a *Announcement) SetAddress(addr string) {
	a.mu.Lock()
	a.info.Address = addr
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Announcement) put(ctx context.Context) error {
	a.mu.Lock()
	info := a.info
	a.mu.Unlock()
	if a.applied != nil {
		info.Applied = a.applied()
	}
	info.Heartbeat = time.Now().UTC()
	b, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("cluster: announce %s: %w", info.Name, err)
	}
	rev, err := a.nodes.kv.Put(ctx, info.Name, b)
	if err != nil {
		return fmt.Errorf("cluster: announce %s: %w", info.Name, err)
	}
	a.mu.Lock()
	a.rev = rev
	a.mu.Unlock()
	return nil
}

func (a *Announcement) loop() {
	defer close(a.done)
	t := time.NewTicker(a.nodes.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		case <-a.wake:
		}
		ctx, cancel := context.WithTimeout(context.Background(), a.nodes.cfg.Heartbeat)
		err := a.put(ctx)
		cancel()
		if err != nil {
			a.nodes.cfg.Logger.Warn("cluster: node heartbeat", "err", err)
		}
	}
}

// Stop ends the heartbeat and removes the node from the directory
// (unless another process announced the name since).
func (a *Announcement) Stop(ctx context.Context) error {
	a.once.Do(func() { close(a.stop) })
	<-a.done
	a.mu.Lock()
	name, rev := a.info.Name, a.rev
	a.mu.Unlock()
	err := a.nodes.kv.Delete(ctx, name, jetstream.LastRevision(rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !isWrongLastSeq(err) {
		return fmt.Errorf("cluster: leave the node directory: %w", err)
	}
	return nil
}

// LeaseInfo describes one held lease, as Leases.List reads it.
type LeaseInfo struct {
	Tree     string
	Node     string
	Revision uint64
	Acquired time.Time // when the holder took it
	Renewed  time.Time // when the holder last wrote it
}

// List returns the leases held now, by tree, at most limit of them
// (0: no limit); truncated reports that there were more.
func (ls *Leases) List(ctx context.Context, limit int) (leases []LeaseInfo, truncated bool, err error) {
	entries, truncated, err := readBucket(ctx, ls.kv, limit)
	if err != nil {
		return nil, false, fmt.Errorf("cluster: list leases: %w", err)
	}
	leases = make([]LeaseInfo, 0, len(entries))
	for _, e := range entries {
		var v leaseValue
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			ls.cfg.Logger.Warn("cluster: skipping a bad lease", "tree", e.Key(), "err", err)
			continue
		}
		leases = append(leases, LeaseInfo{Tree: e.Key(), Node: v.Node, Revision: e.Revision(), Acquired: v.At, Renewed: e.Created()})
	}
	slices.SortFunc(leases, func(a, b LeaseInfo) int { return cmp.Compare(a.Tree, b.Tree) })
	return leases, truncated, nil
}

// readBucket reads the live entries of a bucket (deleted and expired
// keys left out) with one watcher, at most limit of them (0: all).
func readBucket(ctx context.Context, kv jetstream.KeyValue, limit int) (entries []jetstream.KeyValueEntry, truncated bool, err error) {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, false, fmt.Errorf("watcher of %s stopped", kv.Bucket())
			}
			if e == nil { // every current value was sent
				return entries, false, nil
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			if limit > 0 && len(entries) == limit {
				return entries, true, nil
			}
			entries = append(entries, e)
		case <-ctx.Done():
			return nil, false, context.Cause(ctx)
		}
	}
}

// LastCatalogSeqAll returns the stream sequence of the newest message
// on any tree's catalog subjects (ownership markers included), 0 if
// none: once a node's projection applied it, the node's store shows
// every catalog event committed before the call.
func (l *Log) LastCatalogSeqAll(ctx context.Context) (uint64, error) {
	m, err := l.stream.GetLastMsgForSubject(ctx, AllCatalog)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("cluster: last catalog sequence: %w", err)
	}
	return m.Sequence, nil
}
