package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// LogConfig configures the event stream.
type LogConfig struct {
	// Stream is the JetStream stream's name (default METIS_EVENTS).
	Stream string
	// Replicas of the stream. 0 picks 3 when the server is part of a
	// cluster and 1 otherwise. A single replica can lose acknowledged
	// messages in an OS crash: the file store syncs on an interval.
	Replicas int
	// Retention is how long catalog events are kept (the stream's
	// maximum age; default 168h, metis's --retention).
	Retention time.Duration
	// StreamingTTL is the per-message TTL of streaming events (default
	// 15m): long enough for a turn's deltas to be replayed while it runs,
	// short enough that the log does not keep every token.
	StreamingTTL time.Duration
	// Duplicates is the window in which a retried publish of the same
	// event id is recognised and stored once (default 2m).
	Duplicates time.Duration
	// ImageBucket is the JetStream object store bucket holding the bytes
	// of the images the log's records refer to (default METIS_IMAGES;
	// images.go). Its objects expire with Retention.
	ImageBucket string
	// Logger receives the streaming events the stream did not
	// acknowledge after an asynchronous publish (default slog.Default()).
	Logger *slog.Logger
}

// Defaults of LogConfig.
const (
	DefaultStream       = "METIS_EVENTS"
	DefaultRetention    = 168 * time.Hour
	DefaultStreamingTTL = 15 * time.Minute
	DefaultDuplicates   = 2 * time.Minute
)

func (c LogConfig) withDefaults(nc *nats.Conn) LogConfig {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Replicas <= 0 {
		c.Replicas = defaultReplicas(nc)
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	if c.StreamingTTL <= 0 {
		c.StreamingTTL = DefaultStreamingTTL
	}
	if c.Duplicates <= 0 {
		c.Duplicates = DefaultDuplicates
	}
	if c.ImageBucket == "" {
		c.ImageBucket = DefaultImageBucket
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Log is the cluster's event log: one JetStream stream.
type Log struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	images *imageBucket
	cfg    LogConfig

	refused       atomic.Uint64 // streaming events the stream refused (RefusedStreaming)
	refusedSince  atomic.Uint64 // since the last log line about them
	refusedLogged atomic.Int64  // unix nanoseconds of that line
}

// OpenLog creates the event stream, or updates its configuration, and
// returns the log.
func OpenLog(ctx context.Context, nc *nats.Conn, cfg LogConfig) (*Log, error) {
	cfg = cfg.withDefaults(nc)
	l := &Log{cfg: cfg}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncTimeout(asyncAckTimeout),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			l.refusedStreaming(m, err)
		}))
	if err != nil {
		return nil, fmt.Errorf("cluster: jetstream: %w", err)
	}
	st, err := createOrUpdateStream(ctx, js, jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "metis events: metis.evt.<tree>.<session>.<c|s>",
		Subjects:    []string{AllSubjects},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.Retention,
		Duplicates:  cfg.Duplicates,
		AllowMsgTTL: true,
		AllowDirect: true,
		Discard:     jetstream.DiscardOld,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: stream %s: %w", cfg.Stream, err)
	}
	images, err := openImages(ctx, js, cfg.ImageBucket, cfg.Replicas, cfg.Retention)
	if err != nil {
		return nil, err
	}
	l.js, l.stream, l.images = js, st, images
	return l, nil
}

// refusedLogEvery spaces the log lines about streaming events the
// stream did not store.
const refusedLogEvery = 10 * time.Second

// refusedStreaming counts a streaming event sent without waiting that
// the stream refused or did not acknowledge in time (a leader lost or
// being elected), and logs it, at most once per refusedLogEvery with
// the number since: an outage can cost thousands.
func (l *Log) refusedStreaming(m *nats.Msg, err error) {
	l.refused.Add(1)
	l.refusedSince.Add(1)
	now := time.Now().UnixNano()
	last := l.refusedLogged.Load()
	if now-last < int64(refusedLogEvery) || !l.refusedLogged.CompareAndSwap(last, now) {
		return
	}
	l.cfg.Logger.Warn("cluster: streaming events not stored by the stream; other nodes' clients are told of the gap",
		"events", l.refusedSince.Swap(0), "last_event", m.Header.Get(nats.MsgIdHdr), "subject", m.Subject, "err", err)
}

// RefusedStreaming counts the streaming events this node sent that the
// stream refused or did not acknowledge in time.
func (l *Log) RefusedStreaming() uint64 { return l.refused.Load() }

// defaultReplicas is the replicas of the stream and the buckets when
// none are configured: 3 when the server nc is connected to is part of
// a NATS cluster, 1 otherwise.
func defaultReplicas(nc *nats.Conn) int {
	if nc != nil && nc.ConnectedClusterName() != "" {
		return 3
	}
	return 1
}

// createOrUpdateStream creates the stream, or updates it when it exists
// with another configuration. It creates first: nodes of a fresh cluster
// start together, and concurrent creates of one configuration all
// succeed, where an update racing a create (the client library's
// CreateOrUpdateStream updates first) can wait for a stream leader
// that is not elected yet until its context ends.
func createOrUpdateStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	return whilePlacing(ctx, func() (jetstream.Stream, error) {
		st, err := js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return js.UpdateStream(ctx, cfg)
		}
		return st, err
	})
}

// placeRetry spaces the attempts of whilePlacing.
const placeRetry = 250 * time.Millisecond

// whilePlacing runs create until it does not fail for want of servers
// to place the replicas on, or ctx ends: a NATS cluster that just
// formed counts its servers as peers only once it received their
// statistics (seconds, on a loaded machine), and refuses a replicated
// stream or bucket until then ("no suitable peers for placement").
func whilePlacing[T any](ctx context.Context, create func() (T, error)) (T, error) {
	for {
		v, err := create()
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrCodeNoPeers {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(placeRetry):
		}
	}
}

// jsErrCodeNoPeers is the stream's error for replicas it cannot place:
// not enough servers known to the cluster's JetStream (yet).
const jsErrCodeNoPeers jetstream.ErrorCode = 10005

// createOrUpdateKV is createOrUpdateStream for a key-value bucket:
// create first, update only when the bucket exists with another
// configuration.
func createOrUpdateKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return whilePlacing(ctx, func() (jetstream.KeyValue, error) {
		kv, err := js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			return js.UpdateKeyValue(ctx, cfg)
		}
		return kv, err
	})
}

// Config returns the log's configuration, defaults filled in.
func (l *Log) Config() LogConfig { return l.cfg }

// JetStream returns the JetStream context the log uses.
func (l *Log) JetStream() jetstream.JetStream { return l.js }

// Published is the stream's acknowledgement of one event.
type Published struct {
	Seq       uint64 // stream sequence of the event's message
	Duplicate bool   // the stream already held this event id: nothing was added
}

// PublishStreaming appends a streaming event of tree with the log's
// per-message TTL. Its id is the message id, so a retry is stored once.
func (l *Log) PublishStreaming(ctx context.Context, tree string, ev *event.Event) (Published, error) {
	return l.publishStreaming(ctx, tree, ev)
}

func (l *Log) publishStreaming(ctx context.Context, tree string, ev *event.Event, opts ...jetstream.PublishOpt) (Published, error) {
	if event.FamilyOf(ev.Type) != event.Streaming {
		return Published{}, fmt.Errorf("cluster: publish %s: not a streaming event", ev)
	}
	if err := validIDs(tree, ev.SessionID); err != nil {
		return Published{}, err
	}
	ack, err := l.js.PublishMsg(ctx, &nats.Msg{
		Subject: Subject(tree, ev.SessionID, event.Streaming),
		Data:    ev.JSON(),
	}, append(opts, jetstream.WithMsgID(ev.ID), jetstream.WithMsgTTL(l.cfg.StreamingTTL), jetstream.WithExpectStream(l.cfg.Stream))...)
	if err != nil {
		return Published{}, fmt.Errorf("cluster: publish %s: %w", ev, err)
	}
	return Published{Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// asyncAckTimeout bounds the wait for the acknowledgement of an
// asynchronous publish; a message not acknowledged by then is reported
// as not published.
const asyncAckTimeout = 30 * time.Second

// PublishStreamingAsync appends a streaming event like PublishStreaming
// but returns once the message is sent, without waiting for the
// stream's acknowledgement. Messages sent on one connection reach the
// stream in the order they were sent (the synchronous publishes
// included), so an owner that publishes a tree's events in id order
// keeps them in id order with many deltas in flight, instead of one
// round trip to a quorum of replicas per delta. A message the stream
// refuses, or does not acknowledge within asyncAckTimeout, is logged by
// the log's Logger: for a reader it is a gap, the streaming_gap case. A
// refused message is not retried (a retry could land after later
// events). It blocks only while too many acknowledgements are
// outstanding (4,000), and fails if that lasts.
func (l *Log) PublishStreamingAsync(tree string, ev *event.Event) error {
	return l.publishStreamingAsync(tree, ev, nil)
}

func (l *Log) publishStreamingAsync(tree string, ev *event.Event, h nats.Header) error {
	if event.FamilyOf(ev.Type) != event.Streaming {
		return fmt.Errorf("cluster: publish %s: not a streaming event", ev)
	}
	if err := validIDs(tree, ev.SessionID); err != nil {
		return err
	}
	_, err := l.js.PublishMsgAsync(&nats.Msg{
		Subject: Subject(tree, ev.SessionID, event.Streaming),
		Header:  h,
		Data:    ev.JSON(),
	}, jetstream.WithMsgID(ev.ID), jetstream.WithMsgTTL(l.cfg.StreamingTTL), jetstream.WithExpectStream(l.cfg.Stream),
		jetstream.WithRetryAttempts(0))
	if err != nil {
		return fmt.Errorf("cluster: publish %s: %w", ev, err)
	}
	return nil
}

// PublishCatalog appends a catalog event of tree with the store ops of
// its group, unfenced; the bytes of the group's images are put in the
// image bucket first (images.go). Owners publish through their Fence instead; this
// is for tools and tests that write a tree nobody owns.
func (l *Log) PublishCatalog(ctx context.Context, tree string, ev *event.Event, ops []store.Op) (Published, error) {
	return l.publishCatalog(ctx, tree, ev, ops, nil)
}

func (l *Log) publishCatalog(ctx context.Context, tree string, ev *event.Event, ops []store.Op, h nats.Header, opts ...jetstream.PublishOpt) (Published, error) {
	if event.FamilyOf(ev.Type) != event.Catalog {
		return Published{}, fmt.Errorf("cluster: publish %s: not a catalog event", ev)
	}
	if err := validIDs(tree, ev.SessionID); err != nil {
		return Published{}, err
	}
	body, err := EncodeRecord(ev, ops)
	if err != nil {
		return Published{}, err
	}
	if err := l.PutImages(ctx, ops); err != nil {
		return Published{}, fmt.Errorf("cluster: publish %s: %w", ev, err)
	}
	opts = append(opts, jetstream.WithMsgID(ev.ID), jetstream.WithExpectStream(l.cfg.Stream))
	ack, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: Subject(tree, ev.SessionID, event.Catalog), Header: h, Data: body}, opts...)
	if err != nil {
		return Published{}, fmt.Errorf("cluster: publish %s: %w", ev, err)
	}
	return Published{Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// LastCatalogSeq returns the stream sequence of the newest message on
// tree's catalog subjects (ownership markers included), 0 if none. The
// stream's leader answers (see lastOn), so it is never older than a
// catalog publish already acknowledged.
func (l *Log) LastCatalogSeq(ctx context.Context, tree string) (uint64, error) {
	if err := ValidToken(tree); err != nil {
		return 0, err
	}
	seq, err := l.lastOn(ctx, CatalogFilter(tree))
	if err != nil {
		return 0, fmt.Errorf("cluster: last catalog sequence of %s: %w", tree, err)
	}
	return seq, nil
}

// LastSeq returns the stream's last sequence (0 when empty).
func (l *Log) LastSeq(ctx context.Context) (uint64, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("cluster: stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

func validIDs(tree, session string) error {
	if err := ValidToken(tree); err != nil {
		return fmt.Errorf("cluster: tree: %w", err)
	}
	if err := ValidToken(session); err != nil {
		return fmt.Errorf("cluster: session: %w", err)
	}
	return nil
}
