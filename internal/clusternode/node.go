package clusternode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
)

// Node is this server's part in a metis cluster (cfg.NATS set,
// docs/scale-out.md): the bus commits through the log, the projection
// keeps the local store a copy of it, the trees this node creates are
// owned here and answer routed requests with the session manager, and
// the trees owned elsewhere reach this node's clients through feeds.
type Node struct {
	replicas int // of the stream and the buckets
	name     string
	logger   *slog.Logger
	nc       *nats.Conn
	log      *cluster.Log
	leases   *cluster.Leases
	router   *cluster.Router
	proj     *cluster.Projection
	store    *cluster.Store
	st       *store.Store   // the projection's SQLite store
	feeds    *cluster.Feeds // set by StartFeeds, once the bus exists
	bus      *bus.Bus
	closed   chan struct{} // closed when the NATS connection is

	projStop context.CancelFunc
	projDone chan error

	sessions *session.Manager // set once the manager exists
	mcp      SessionMCP       // its MCP manager (SetMCP; handlers_session.go)

	takeMu sync.Mutex // one tree taken at a time
	mu     sync.Mutex // guards owners and lost
	owners map[string]*ownedTree
	lost   map[string]bool // trees this node lost, until it takes them again (failover.go)
	fo     *failover       // taking over the trees of dead owners (failover.go)

	attachMu sync.Mutex
	attached map[string]*treeFeed

	attachedSessions func() []string // sessions with clients on this node (StartFeeds)

	waitMu  sync.Mutex                           // guards waiters
	waiters map[string]map[*leaseWaiter]struct{} // routed requests waiting for a tree's owner (route.go)

	status *nodeStatus    // node directory, metrics, GET /cluster (status.go)
	meta   *metaForwarder // set by StartFeeds: meta-events of clients of trees owned elsewhere (meta.go)
}

// ownedTree is a tree this node owns, and its routed requests'
// subscription.
type ownedTree struct {
	owner    *cluster.Owner
	lastUsed atomic.Int64     // unix nanoseconds of its last publish (idle.go)
	serving  *cluster.Serving // its routed requests' subscription
	ready    chan struct{}    // closed once routed requests are answered (take: its open turns ended)
	handled  chan struct{}    // closed once the end of the ownership was handled (onLost)
}

// connectTimeout bounds connecting to NATS and opening the stream and
// the lease bucket at startup.
const connectTimeout = 30 * time.Second

// Start connects to cfg.NATS, opens the log and the lease bucket, and
// starts the projection of the log into st. The bus is made on Store;
// then StartFeeds, StartStatus, SetSessions and Recover complete the
// node, and Close stops it (after the bus is closed).
func Start(ctx context.Context, cfg config.Config, st *store.Store, logger *slog.Logger) (_ *Node, err error) {
	name, err := nodeName(cfg.Node)
	if err != nil {
		return nil, err
	}
	// The stream refuses a message TTL under a second, and keeps whole
	// seconds of it: what the nodes count on must be what it keeps.
	if ttl := cfg.StreamingTTL; ttl != 0 && (ttl < time.Second || ttl%time.Second != 0) {
		return nil, fmt.Errorf("--streaming-ttl %s: must be a whole number of seconds, at least 1s", ttl)
	}
	if r := cfg.NATSReplicas; r < 0 || r > 5 {
		return nil, fmt.Errorf("--nats-replicas %d: must be 1 to 5 (0: 3 in a NATS cluster, else 1)", r)
	}
	closed := make(chan struct{})
	opts := []nats.Option{nats.Name("metis " + name), nats.MaxReconnects(-1),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) })}
	if cfg.NATSCreds != "" {
		if err := checkCredsFile(cfg.NATSCreds); err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserCredentials(cfg.NATSCreds))
	}
	nc, err := nats.Connect(cfg.NATS, opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: connect to %s: %w", cfg.NATS, err)
	}
	defer func() {
		if err != nil {
			nc.Close()
		}
	}()
	octx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	lg, err := cluster.OpenLog(octx, nc, cluster.LogConfig{Retention: cfg.Retention, StreamingTTL: cfg.StreamingTTL,
		Replicas: cfg.NATSReplicas, Logger: logger})
	if err != nil {
		if cfg.NATSReplicas > 1 {
			return nil, fmt.Errorf("%w (--nats-replicas %d needs a NATS cluster of at least %d servers with JetStream)", err, cfg.NATSReplicas, cfg.NATSReplicas)
		}
		return nil, err
	}
	if cfg.LeaseTTL != 0 && cfg.LeaseTTL < time.Second {
		return nil, fmt.Errorf("--lease-ttl %s: must be at least 1s", cfg.LeaseTTL)
	}
	leases, err := cluster.OpenLeases(octx, lg.JetStream(), name, cluster.LeaseConfig{Logger: logger, TTL: cfg.LeaseTTL,
		Replicas: lg.Config().Replicas})
	if err != nil {
		return nil, err
	}
	cn := &Node{replicas: lg.Config().Replicas, name: name, logger: logger, nc: nc, closed: closed, log: lg, leases: leases, st: st,
		router: cluster.NewRouter(nc, 0, logger), owners: map[string]*ownedTree{}, lost: map[string]bool{},
		fo: newFailover(), attached: map[string]*treeFeed{}}
	cn.proj = cluster.NewProjection(lg, st, "", logger)
	pctx, stop := context.WithCancel(context.Background())
	cn.projStop, cn.projDone = stop, make(chan error, 1)
	go func() {
		err := cn.proj.Run(pctx)
		if err != nil {
			logger.Error("cluster: projection stopped; this node's reads are stale until it restarts", "err", err)
		}
		cn.projDone <- err
	}()
	cn.store = cluster.NewStore(st, cn.proj, cn.storeOwner)
	cn.store.SetLogger(logger)
	return cn, nil
}

// nodeName returns the configured node name, or the host name made a
// valid subject token.
func nodeName(configured string) (string, error) {
	name := configured
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("cluster: node name: %w (set --node)", err)
		}
		name = strings.Map(func(r rune) rune {
			if r <= ' ' || r == 0x7f || strings.ContainsRune(".*>", r) {
				return '-'
			}
			return r
		}, h)
	}
	if err := cluster.ValidToken(name); err != nil {
		return "", fmt.Errorf("--node %q: %w", name, err)
	}
	return name, nil
}

// checkCredsFile refuses a NATS credentials file that is not a regular
// file or that group or others may read, like the token file.
func checkCredsFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("nats credentials file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("nats credentials file %s is not a regular file (%s)", path, st.Mode().Type())
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("nats credentials file %s has mode %04o: group or others may read it; run chmod 600 %s", path, perm, path)
	}
	return nil
}

// Store is the bus's store in cluster mode: the log.
func (cn *Node) Store() *cluster.Store { return cn.store }

// Name is the node's name in the cluster.
func (cn *Node) Name() string { return cn.name }

// Logger is the node's logger.
func (cn *Node) Logger() *slog.Logger { return cn.logger }

// SetSessions gives the node the session manager it answers routed
// requests and ends turns with; call it before Recover.
func (cn *Node) SetSessions(m *session.Manager) { cn.sessions = m }

// StartFeeds creates the feeds once the bus exists: a tree owned
// elsewhere reaches this node's clients through the bus's Relay.
// attached lists the sessions that have clients on this node (the
// hub's): a tree with clients here keeps its lease however idle (idle.go).
func (cn *Node) StartFeeds(b *bus.Bus, attached func() []string) {
	cn.bus = b
	cn.attachedSessions = attached
	cn.feeds = cluster.NewAppliedFeeds(cn.log, cn.proj, relaySink{b: b, log: cn.logger, own: cn.Emits}, cn.logger)
	cn.meta = newMetaForwarder(cn.logger, cn.sendMeta, cn.countMeta)
}

// relaySink hands a feed's events to the bus, which delivers them to
// the hub in the tree's outbox; the events of a tree this node owns
// (it took the tree over while following it) are its own, delivered
// by its bus already.
type relaySink struct {
	b   *bus.Bus
	log *slog.Logger
	own func(sessionID string) bool
}

// Gap tells the bus that events of a tree owned elsewhere never
// reached the log (cluster.GapSink): its clients here are told.
func (r relaySink) Gap(tree, through string) {
	if r.own(tree) {
		return
	}
	if err := r.b.RelayGap(context.Background(), tree, through); err != nil {
		r.log.Error("cluster: relay a gap", "tree", tree, "through", through, "err", err)
	}
}

func (r relaySink) Publish(ev *event.Event) {
	if r.own(ev.SessionID) {
		return
	}
	if err := r.b.Relay(context.Background(), ev); err != nil {
		r.log.Error("cluster: relay", "event", ev.ID, "err", err)
	}
}

// ownerOf returns this node's owner of tree, taking the tree (its
// lease, its fence, its routed requests) if the node does not own it.
// It fails with cluster.ErrLeaseHeld if another node does. Taking a
// tree talks to NATS: it runs under takeMu, never under mu, so owns
// (which the hub calls while delivering) never waits for it.
func (cn *Node) ownerOf(ctx context.Context, tree string) (*cluster.Owner, error) {
	o, _, err := cn.acquire(ctx, tree)
	return o, err
}

// liveOwner returns this node's owner of tree if it still owns it.
func (cn *Node) liveOwner(tree string) *cluster.Owner {
	if ot := cn.liveTree(tree); ot != nil {
		return ot.owner
	}
	return nil
}

// liveTree returns the tree if this node still owns it.
func (cn *Node) liveTree(tree string) *ownedTree {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if ot := cn.owners[tree]; ot != nil && ot.owner.Context().Err() == nil {
		return ot
	}
	return nil
}

// owns reports whether this node owns tree now.
func (cn *Node) owns(tree string) bool { return cn.liveOwner(tree) != nil }

// Owns reports whether this node owns tree now.
func (cn *Node) Owns(tree string) bool { return cn.owns(tree) }

// treeOf returns the root of a session's delegation tree.
func (cn *Node) treeOf(ctx context.Context, sessionID string) (string, error) {
	return cn.store.Tree(ctx, sessionID)
}

// Emits reports whether this node may emit into a session: only the
// owner of its tree does (the hub's meta-events, a routing policy's
// announcement).
func (cn *Node) Emits(sessionID string) bool {
	tree, err := cn.treeOf(context.Background(), sessionID)
	return err == nil && cn.owns(tree)
}

// Close stops the node's part in the cluster: the meta-events still
// queued for other owners, the cluster store's publishers, the feeds,
// the owned trees (their leases are released, so another node can take
// them at once), the projection and the connection. The bus must be closed first.
func (cn *Node) Close(ctx context.Context) error {
	cn.StopFailover()
	var errs []error
	if cn.meta != nil {
		// The clients' last meta-events (their unregistrations at
		// shutdown) still reach their trees' owners.
		if err := cn.meta.close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	cn.store.Close()
	if cn.feeds != nil {
		cn.feeds.Close()
	}
	if err := cn.stopStatus(ctx); err != nil {
		errs = append(errs, err)
	}
	cn.takeMu.Lock()
	cn.mu.Lock()
	owned := cn.owners
	cn.owners = map[string]*ownedTree{}
	cn.mu.Unlock()
	cn.takeMu.Unlock()
	for tree, ot := range owned {
		cn.stopServing(ot)
		if err := ot.owner.Release(ctx); err != nil && !errors.Is(err, cluster.ErrLeaseLost) {
			errs = append(errs, fmt.Errorf("release tree %s: %w", tree, err))
		}
	}
	cn.fo.wg.Wait()
	cn.projStop()
	<-cn.projDone
	if err := cn.nc.Drain(); err != nil {
		cn.nc.Close()
	}
	select {
	case <-cn.closed:
	case <-ctx.Done():
		cn.nc.Close()
		errs = append(errs, fmt.Errorf("nats connection: drain: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

// ReadyNote names the cluster and the node on the ready line.
func (cn *Node) ReadyNote() string {
	where := cn.nc.ConnectedClusterName()
	if where == "" {
		where = cn.nc.ConnectedServerName()
	}
	return fmt.Sprintf("; cluster node %s (nats %s, stream %s)", cn.name, where, cn.log.Config().Stream)
}
