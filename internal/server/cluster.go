package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/stream"
	"github.com/metis-agent/metis/protocol"
)

// clusterNode is this server's part in a metis cluster (cfg.NATS set,
// docs/scale-out.md): the bus commits through the log, the projection
// keeps the local store a copy of it, the trees this node creates are
// owned here and answer routed requests with the session manager, and
// the trees owned elsewhere reach this node's clients through feeds.
type clusterNode struct {
	name   string
	logger *slog.Logger
	nc     *nats.Conn
	log    *cluster.Log
	leases *cluster.Leases
	router *cluster.Router
	proj   *cluster.Projection
	store  *cluster.Store
	st     *store.Store   // the projection's SQLite store
	feeds  *cluster.Feeds // set by startFeeds, once the bus exists
	bus    *bus.Bus
	closed chan struct{} // closed when the NATS connection is

	projStop context.CancelFunc
	projDone chan error

	sessions *session.Manager // set once the manager exists

	takeMu sync.Mutex // one tree taken at a time
	mu     sync.Mutex // guards owners and lost
	owners map[string]*ownedTree
	lost   map[string]bool // trees this node lost, until it takes them again (cluster_failover.go)
	fo     *failover       // taking over the trees of dead owners (cluster_failover.go)

	attachMu sync.Mutex
	attached map[string]*treeFeed

	status *nodeStatus    // node directory, metrics, GET /cluster (cluster_status.go)
	meta   *metaForwarder // set by startFeeds: meta-events of clients of trees owned elsewhere (cluster_meta.go)
}

// ownedTree is a tree this node owns, and its routed requests'
// subscription.
type ownedTree struct {
	owner   *cluster.Owner
	serving *cluster.Serving // nil until the tree is served (guarded by clusterNode.mu)
	handled chan struct{}    // closed once the end of the ownership was handled (onLost)
}

// treeFeed counts this node's clients of a tree owned elsewhere.
type treeFeed struct {
	clients int
	leave   func()
}

// connectTimeout bounds connecting to NATS and opening the stream and
// the lease bucket at startup.
const connectTimeout = 30 * time.Second

// startCluster connects to cfg.NATS, opens the log and the lease
// bucket, and starts the projection of the log into st.
func startCluster(ctx context.Context, cfg config.Config, st *store.Store, logger *slog.Logger) (_ *clusterNode, err error) {
	name, err := nodeName(cfg.Node)
	if err != nil {
		return nil, err
	}
	// The stream refuses a message TTL under a second, and keeps whole
	// seconds of it: what the nodes count on must be what it keeps.
	if ttl := cfg.StreamingTTL; ttl != 0 && (ttl < time.Second || ttl%time.Second != 0) {
		return nil, fmt.Errorf("--streaming-ttl %s: must be a whole number of seconds, at least 1s", ttl)
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
	lg, err := cluster.OpenLog(octx, nc, cluster.LogConfig{Retention: cfg.Retention, StreamingTTL: cfg.StreamingTTL, Logger: logger})
	if err != nil {
		return nil, err
	}
	if cfg.LeaseTTL != 0 && cfg.LeaseTTL < time.Second {
		return nil, fmt.Errorf("--lease-ttl %s: must be at least 1s", cfg.LeaseTTL)
	}
	leases, err := cluster.OpenLeases(octx, lg.JetStream(), name, cluster.LeaseConfig{Logger: logger, TTL: cfg.LeaseTTL})
	if err != nil {
		return nil, err
	}
	cn := &clusterNode{name: name, logger: logger, nc: nc, closed: closed, log: lg, leases: leases, st: st,
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

// startFeeds creates the feeds once the bus exists: a tree owned
// elsewhere reaches this node's clients through the bus's Relay.
func (cn *clusterNode) startFeeds(b *bus.Bus) {
	cn.bus = b
	cn.feeds = cluster.NewAppliedFeeds(cn.log, cn.proj, relaySink{b: b, log: cn.logger, own: cn.emits}, cn.logger)
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
func (cn *clusterNode) ownerOf(ctx context.Context, tree string) (*cluster.Owner, error) {
	o, _, err := cn.acquire(ctx, tree)
	return o, err
}

// liveOwner returns this node's owner of tree if it still owns it.
func (cn *clusterNode) liveOwner(tree string) *cluster.Owner {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if ot := cn.owners[tree]; ot != nil && ot.owner.Context().Err() == nil {
		return ot.owner
	}
	return nil
}

// owns reports whether this node owns tree now.
func (cn *clusterNode) owns(tree string) bool { return cn.liveOwner(tree) != nil }

// treeOf returns the root of a session's delegation tree.
func (cn *clusterNode) treeOf(ctx context.Context, sessionID string) (string, error) {
	return cn.store.Tree(ctx, sessionID)
}

// emits reports whether this node may emit into a session: only the
// owner of its tree does (the hub's meta-events).
func (cn *clusterNode) emits(sessionID string) bool {
	tree, err := cn.treeOf(context.Background(), sessionID)
	return err == nil && cn.owns(tree)
}

// Submit implements cluster.Handler: a turn routed from another node.
func (cn *clusterNode) Submit(ctx context.Context, tree string, req cluster.SubmitRequest) (cluster.SubmitReply, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return cluster.SubmitReply{}, err
	}
	id, err := cn.sessions.Submit(ctx, req.SessionID, req.Content)
	if err != nil {
		return cluster.SubmitReply{}, remoteError(err)
	}
	return cluster.SubmitReply{TurnID: id}, nil
}

// Cancel implements cluster.Handler: a cancel routed from another node.
func (cn *clusterNode) Cancel(ctx context.Context, tree string, req cluster.CancelRequest) (cluster.CancelReply, error) {
	if err := cn.inTree(ctx, tree, req.SessionID); err != nil {
		return cluster.CancelReply{}, err
	}
	res, err := cn.sessions.Cancel(ctx, req.SessionID, req.TurnID, req.Reason)
	if err != nil {
		return cluster.CancelReply{}, remoteError(err)
	}
	return cluster.CancelReply{Result: string(res)}, nil
}

// inTree refuses a routed request for a session outside the tree it
// was sent to.
func (cn *clusterNode) inTree(ctx context.Context, tree, sessionID string) error {
	got, err := cn.treeOf(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return &cluster.RemoteError{Code: protocol.CodeSessionNotFound, Message: "no session " + sessionID}
	}
	if err != nil {
		return err
	}
	if got != tree {
		return &cluster.RemoteError{Code: protocol.CodeInvalidRequest, Message: "session " + sessionID + " is not in tree " + tree}
	}
	return nil
}

// remoteError gives a session manager error the code the API answers
// it with, so the node that asked answers the same.
func remoteError(err error) error {
	code := ""
	switch {
	case errors.Is(err, session.ErrNotFound):
		code = protocol.CodeSessionNotFound
	case errors.Is(err, session.ErrTurnNotFound):
		code = protocol.CodeTurnNotFound
	case errors.Is(err, session.ErrTurnInFlight):
		code = protocol.CodeTurnInFlight
	case errors.Is(err, session.ErrInvalid):
		code = protocol.CodeInvalidRequest
	case errors.Is(err, session.ErrClosed):
		code = protocol.CodeShuttingDown
	default:
		return err
	}
	return &cluster.RemoteError{Code: code, Message: err.Error()}
}

// followTimeout bounds what the first client of a tree owned elsewhere
// waits for, to start following it: the reads of the log, the
// projection and the feed catching up. Past it the client is refused
// (503 owner_unavailable) and retries.
const followTimeout = 30 * time.Second

// attach registers a client of a tree owned elsewhere: the first one
// reads the tree's streaming events the log still holds, starts the
// tree's feed right after them, waits until the projection shows
// everything the log held for the tree when the feed started, moves the
// bus's delivery point there, and backfills the hub's rings with those
// streaming events, so the hub's seam splits store (and ring) and feed
// exactly, and a cursor taken on another node replays here as there.
// The returned leave must be called when the client goes.
func (cn *clusterNode) attach(ctx context.Context, tree, sessionID string) (leave func(), err error) {
	cn.attachMu.Lock()
	defer cn.attachMu.Unlock()
	tf := cn.attached[tree]
	if tf == nil {
		// Bounded: the node's other first clients wait on attachMu.
		ctx, cancel := context.WithTimeout(ctx, followTimeout)
		defer cancel()
		tail, err := cn.log.LastSeq(ctx)
		if err != nil {
			return nil, fmt.Errorf("cluster: follow tree %s: %w", tree, err)
		}
		held, heldFrom, err := cn.log.Streaming(ctx, tree, tail)
		if err != nil {
			return nil, fmt.Errorf("cluster: follow tree %s: %w", tree, err)
		}
		if err := cn.bus.Follow(ctx, sessionID); err != nil {
			return nil, fmt.Errorf("cluster: follow tree %s: %w", tree, err)
		}
		lv, err := cn.feeds.JoinAt(tree, tail)
		if err != nil {
			return nil, err
		}
		seq, err := cn.log.LastCatalogSeq(ctx, tree)
		if err == nil {
			err = cn.proj.WaitApplied(ctx, seq)
		}
		// The delivery point goes to the tree's newest catalog event up
		// to the tail, which the feed will not relay; not to what the
		// store holds, which may be ahead of the feed (the feed would
		// then drop what comes between as delivered).
		through := ""
		switch {
		case err != nil:
		case seq > tail:
			// The feed relays it, and everything after the tail.
			err = cn.feeds.WaitDelivered(ctx, tree, seq)
		case seq > 0:
			var ev *event.Event
			if ev, err = cn.log.EventAt(ctx, seq); err == nil && ev != nil {
				through = ev.ID
			} else if err == nil {
				// An ownership marker: the store up to it.
				err = cn.catchUpTree(ctx, tree)
			}
		}
		if err == nil {
			err = cn.bus.Backfill(ctx, tree, heldFrom, through, held)
		}
		if err != nil {
			lv()
			return nil, fmt.Errorf("cluster: follow tree %s: %w", tree, err)
		}
		tf = &treeFeed{leave: lv}
		cn.attached[tree] = tf
	}
	tf.clients++
	var once sync.Once
	return func() {
		once.Do(func() {
			cn.attachMu.Lock()
			defer cn.attachMu.Unlock()
			if tf.clients--; tf.clients == 0 {
				delete(cn.attached, tree)
				tf.leave()
			}
		})
	}, nil
}

// catchUpTree moves the delivery point of a tree to the newest event
// the store holds for any of its sessions, the planner's and every
// worker's: emitters made for the workers later (a client that includes
// them) no longer move it, since the bus relays the tree.
func (cn *clusterNode) catchUpTree(ctx context.Context, tree string) error {
	queue := []string{tree}
	for n := 0; len(queue) > 0 && n < 10000; n++ {
		id := queue[0]
		queue = queue[1:]
		if err := cn.bus.CatchUp(ctx, id); err != nil {
			return err
		}
		kids, err := cn.st.Children(ctx, id)
		if err != nil {
			return fmt.Errorf("cluster: workers of %s: %w", id, err)
		}
		for _, k := range kids {
			queue = append(queue, k.ID)
		}
	}
	return nil
}

// close stops the node's part in the cluster: the meta-events still
// queued for other owners, the cluster store's publishers, the feeds,
// the owned trees (their leases are released, so another node can take
// them at once), the projection and the connection. The bus must be closed first.
func (cn *clusterNode) close(ctx context.Context) error {
	cn.stopFailover()
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

// readyNote names the cluster and the node on the ready line.
func (cn *clusterNode) readyNote() string {
	where := cn.nc.ConnectedClusterName()
	if where == "" {
		where = cn.nc.ConnectedServerName()
	}
	return fmt.Sprintf("; cluster node %s (nats %s, stream %s)", cn.name, where, cn.log.Config().Stream)
}

// emits is the hub's Config.Emits: in cluster mode only the owner of a
// session's tree emits into it.
func (s *Server) emits(sessionID string) bool {
	return s.cluster == nil || s.cluster.emits(sessionID)
}

// awaitCursor is the hub's Config.AwaitCursor: in cluster mode a
// cursor taken on another node may be ahead of this one for a moment.
func (s *Server) awaitCursor(ctx context.Context, sessionID, since string) {
	if s.cluster != nil {
		s.cluster.awaitCursor(ctx, sessionID, since)
	}
}

// recover closes the turns a crash left open. In cluster mode an open
// turn may belong to a tree another node runs: the node ends only the
// turns of the trees it takes over (cluster_failover.go).
func (s *Server) recover(ctx context.Context, mgr *session.Manager) error {
	if s.cluster != nil {
		return s.cluster.startFailover(ctx)
	}
	return mgr.Recover(ctx)
}

// clusterNote is the ready line's cluster part ("" single-node).
func (s *Server) clusterNote() string {
	if s.cluster == nil {
		return ""
	}
	return s.cluster.readyNote()
}

// canceller is the stream's cancel frame handler in cluster mode: a
// cancel of a turn of a tree owned elsewhere goes to its owner.
type canceller struct {
	cn    *clusterNode
	local *session.Manager
}

func (c canceller) Cancel(ctx context.Context, sessionID, turnID, reason string) (session.CancelResult, error) {
	tree, err := c.cn.treeOf(ctx, sessionID)
	if err != nil || c.cn.owns(tree) {
		return c.local.Cancel(ctx, sessionID, turnID, reason)
	}
	rep, err := c.cn.router.Cancel(ctx, tree, cluster.CancelRequest{SessionID: sessionID, TurnID: turnID, Reason: reason})
	if err != nil {
		return "", err
	}
	return session.CancelResult(rep.Result), nil
}

// streamCanceller returns what the stream's cancel frames call.
func (s *Server) streamCanceller(mgr *session.Manager) stream.Canceller {
	if s.cluster == nil {
		return mgr
	}
	return canceller{cn: s.cluster, local: mgr}
}
