package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// Entry is one message of the log as a reader sees it.
type Entry struct {
	Seq     uint64 // stream sequence
	Tree    string
	Session string
	// Marker is true for an ownership marker (see Fence): it holds no
	// event and readers skip it, but it occupies a sequence.
	Marker bool
	// Deleted is the session a deletion record removed, with every
	// worker below it (see Fence.PublishDeletion); "" for any other
	// message. Like a marker it holds no event.
	Deleted string
	Event   *event.Event // nil for a marker, a deletion or a bad record
	Ops     []store.Op   // the store ops committed with a catalog event
	// Err is set when the message could not be decoded: the reader
	// decides whether to skip it (it is counted and logged by the
	// projection) or to stop.
	Err error
	// Epoch is the ownership epoch the message was published in (the
	// stream sequence of its owner's marker), Prev the id of the event
	// its owner published before it (epoch.go); 0 and "" when unknown.
	Epoch uint64
	Prev  string
}

// decodeEntry turns one stream message into an Entry.
func decodeEntry(seq uint64, subject string, h nats.Header, data []byte) Entry {
	tree, session, catalog, err := parseSubject(subject)
	e := Entry{Seq: seq, Tree: tree, Session: session}
	e.Epoch, e.Prev = chainOf(h)
	if err != nil {
		e.Err = err
		return e
	}
	if session == ownerToken {
		e.Marker = true
		return e
	}
	if session == deletionToken {
		if !catalog {
			e.Err = fmt.Errorf("%w: a deletion on streaming subject %s", ErrRecord, subject)
			return e
		}
		e.Deleted, e.Err = decodeDeletion(data)
		return e
	}
	ev, ops, err := DecodeRecord(data)
	switch {
	case err != nil:
		e.Err = err
	case ev.SessionID != session:
		e.Err = fmt.Errorf("%w: event %s of session %s on subject %s", ErrRecord, ev.ID, ev.SessionID, subject)
	case (event.FamilyOf(ev.Type) == event.Catalog) != catalog:
		e.Err = fmt.Errorf("%w: event %s (%s) on subject %s of the other family", ErrRecord, ev.ID, ev.Type, subject)
	default:
		e.Event, e.Ops = ev, ops
	}
	return e
}

// ReadFrom positions a reader: the first stream sequence it may deliver
// (0 or 1 for the start of the stream).
type ReadFrom uint64

func (l *Log) ordered(ctx context.Context, filter string, from ReadFrom, more ...string) (jetstream.Consumer, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: append([]string{filter}, more...), DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = uint64(from)
	}
	c, err := l.stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: reader on %s: %w", filter, err)
	}
	return c, nil
}

// Replay calls fn, in stream order (which is id order within a tree),
// with every message on filter from sequence from onwards that exists
// when Replay starts, then returns. Filters: TreeFilter, SessionFilter, CatalogFilter,
// AllCatalog. An error from fn stops the replay and is returned.
func (l *Log) Replay(ctx context.Context, filter string, from ReadFrom, fn func(Entry) error) error {
	last, err := l.lastOn(ctx, filter)
	if err != nil {
		return err
	}
	if last == 0 || last < uint64(from) {
		return nil
	}
	return l.readThrough(ctx, filter, from, last, fn)
}

// readThrough calls fn, in stream order, with the messages on filter
// from sequence from through sequence last (the last message as the
// stream's leader knew it, not "nothing pending": the consumer may live
// on a replica that lags behind), then returns. A message may be gone
// by the time the reader gets to it (a streaming event's TTL expired,
// or a message was deleted), last included: while no message comes, a
// watcher asks the leader every readCheck whether a message on filter
// after the last one read, up to last, still exists, and stops the
// read if none does.
//
// The read itself waits with ctx alone: the client library's ordered
// consumer notices a lost consumer (a server or leader change) by its
// missing heartbeats, which a wait shorter than two heartbeats never
// sees, so short waits on the iterator could wait forever.
//
// more are further subjects the read delivers too (the tree's ownership
// markers, for a read of its streaming events): messages that never
// expire, which the watcher does not look for.
func (l *Log) readThrough(ctx context.Context, filter string, from ReadFrom, last uint64, fn func(Entry) error, more ...string) error {
	c, err := l.ordered(ctx, filter, from, more...)
	if err != nil {
		return err
	}
	it, err := c.Messages()
	if err != nil {
		return fmt.Errorf("cluster: read %s: %w", filter, err)
	}
	defer it.Stop()
	var next atomic.Uint64 // the first sequence not read yet
	next.Store(max(uint64(from), 1))
	var gone atomic.Bool // the watcher found nothing left through last
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(readCheck)
		defer t.Stop()
		seen := next.Load()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			at := next.Load()
			if at != seen {
				seen = at // progress: nothing to ask
				continue
			}
			seq, err := l.msgSeq(ctx, msgGetRequest{Seq: at, NextFor: filter})
			if err == nil && (seq == 0 || seq > last) {
				gone.Store(true)
				it.Stop()
				return
			}
		}
	}()
	defer wg.Wait()
	defer close(done)
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if gone.Load() {
				return nil // what was left through last is gone
			}
			return fmt.Errorf("cluster: read %s: %w", filter, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("cluster: read %s: %w", filter, err)
		}
		seq := md.Sequence.Stream
		if seq > last {
			return nil
		}
		if err := fn(decodeEntry(seq, m.Subject(), m.Headers(), m.Data())); err != nil {
			return err
		}
		if seq >= last {
			return nil
		}
		next.Store(seq + 1)
	}
}

// readCheck is how long readThrough waits for a message before it asks
// the stream's leader whether any is left to wait for.
const readCheck = 250 * time.Millisecond

// lastOn returns the sequence of the newest message on filter, 0 if
// none. It asks the stream's leader (the STREAM.MSG.GET API): the
// stream allows direct gets, which any replica answers, and a replica
// that lags behind the leader would answer with an older message, or
// none, than a publish already acknowledged.
func (l *Log) lastOn(ctx context.Context, filter string) (uint64, error) {
	return l.msgSeq(ctx, msgGetRequest{LastFor: filter})
}

// msgGetRequest is a request of the STREAM.MSG.GET API: the last
// message on a subject filter, or the first at or after a sequence on
// one.
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

// msgSeq returns the sequence of the message the stream's leader finds
// for req, 0 if none.
func (l *Log) msgSeq(ctx context.Context, req msgGetRequest) (uint64, error) {
	filter := req.LastFor + req.NextFor
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	msg, err := l.js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+l.cfg.Stream, body)
	if err != nil {
		return 0, fmt.Errorf("cluster: message on %s: %w", filter, err)
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
		Error *struct {
			Code        int                 `json:"code"`
			ErrCode     jetstream.ErrorCode `json:"err_code"`
			Description string              `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("cluster: message on %s: %w", filter, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == jetstream.JSErrCodeMessageNotFound:
		return 0, nil
	case resp.Error != nil:
		return 0, fmt.Errorf("cluster: message on %s: %s (%d)", filter, resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return 0, fmt.Errorf("cluster: message on %s: an answer without a message", filter)
	}
	return resp.Message.Seq, nil
}

// Follow calls fn, in stream order, with every message on filter from
// sequence from onwards, existing and future, until ctx is done (it then
// returns nil) or fn fails (its error is returned). fn runs on one
// goroutine at a time; Follow returns only after its last call.
//
// A reader that fails (its consumer cannot be made while the stream
// has no leader, the connection closed and reopened) is made again,
// after a growing pause, from the message after the last one fn got:
// Follow never gives up while ctx lasts. (A feed or a projection whose
// Follow returned on such an error stopped for good: every later client
// of that tree on the node got its subscribe_ack and then nothing.)
func (l *Log) Follow(ctx context.Context, filter string, from ReadFrom, fn func(Entry) error) error {
	pause := followRetryFirst
	for {
		got := false
		err := l.follow(ctx, filter, from, func(e Entry) error {
			if err := fn(e); err != nil {
				return &fnError{err}
			}
			from, got = ReadFrom(e.Seq+1), true
			return nil
		})
		var fe *fnError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &fe):
			return fe.err
		case err == nil:
			return nil
		}
		if got {
			pause = followRetryFirst
		}
		l.cfg.Logger.Warn("cluster: reading the log failed; reading again", "filter", filter, "from", uint64(from), "in", pause, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, followRetryMax)
	}
}

// Bounds of Follow's pauses before it reads again.
const (
	followRetryFirst = 250 * time.Millisecond
	followRetryMax   = 5 * time.Second
)

// fnError carries the error of Follow's fn through follow.
type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }

// follow is one reader of Follow.
func (l *Log) follow(ctx context.Context, filter string, from ReadFrom, fn func(Entry) error) error {
	c, err := l.ordered(ctx, filter, from)
	if err != nil {
		return err
	}
	it, err := c.Messages()
	if err != nil {
		return fmt.Errorf("cluster: follow %s: %w", filter, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("cluster: follow %s: %w", filter, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("cluster: follow %s: %w", filter, err)
		}
		if err := fn(decodeEntry(md.Sequence.Stream, m.Subject(), m.Headers(), m.Data())); err != nil {
			return err
		}
	}
}

// Streaming returns the streaming events of tree that the log still
// holds (those whose TTL has not expired) up to stream sequence upTo,
// in stream order (id order): what a node that starts following the
// tree keeps for replays (the in-flight ring, cluster-wide). It also
// returns from, an id such that every streaming event of the tree with
// an id at or after it (and published through upTo) is among them: the
// log drops a tree's streaming events oldest first, and none younger
// than the TTL (less a minute for the clocks of the owner and of the
// servers, which the id's time and the expiry read).
func (l *Log) Streaming(ctx context.Context, tree string, upTo uint64) (evs []*event.Event, from string, err error) {
	if err := ValidToken(tree); err != nil {
		return nil, "", err
	}
	ttl := l.cfg.StreamingTTL
	margin := min(time.Minute, ttl/2)
	seq, err := event.NewSequencer("", func() time.Time { return time.Now().Add(-ttl + margin) })
	if err != nil {
		return nil, "", fmt.Errorf("cluster: streaming of %s: %w", tree, err)
	}
	from, _ = seq.Next()
	// Read up to the last streaming message through upTo as the
	// stream's leader knows it, not until the consumer has nothing
	// pending: the consumer may live on a replica that lags behind.
	last, err := l.lastOn(ctx, StreamingFilter(tree))
	if err != nil || last == 0 {
		return nil, from, err
	}
	last = min(last, upTo)
	// The tree's ownership markers come with them: a deposed owner's
	// late events (epoch.go) are not the tree's.
	var epoch uint64
	err = l.readThrough(ctx, StreamingFilter(tree), 0, last, func(e Entry) error {
		switch {
		case e.Marker:
			epoch = max(epoch, e.Seq)
		case e.Event != nil && !e.Deposed(epoch):
			evs = append(evs, e.Event)
		}
		return nil
	}, ownerSubject(tree))
	if err != nil {
		return nil, "", fmt.Errorf("cluster: streaming of %s: %w", tree, err)
	}
	if len(evs) > 0 {
		from = min(from, evs[0].ID)
	}
	return evs, from, nil
}

// EventAt returns the event stored at stream sequence seq, asking the
// stream's leader; nil for an ownership marker.
func (l *Log) EventAt(ctx context.Context, seq uint64) (*event.Event, error) {
	req, err := json.Marshal(struct {
		Seq uint64 `json:"seq"`
	}{seq})
	if err != nil {
		return nil, err
	}
	msg, err := l.js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+l.cfg.Stream, req)
	if err != nil {
		return nil, fmt.Errorf("cluster: message %d: %w", seq, err)
	}
	var resp struct {
		Message *struct {
			Subject string `json:"subject"`
			Data    []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			ErrCode     jetstream.ErrorCode `json:"err_code"`
			Description string              `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("cluster: message %d: %w", seq, err)
	}
	switch {
	case resp.Error != nil:
		return nil, fmt.Errorf("cluster: message %d: %s (%d)", seq, resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return nil, fmt.Errorf("cluster: message %d: an answer without a message", seq)
	}
	e := decodeEntry(seq, resp.Message.Subject, nil, resp.Message.Data)
	if e.Err != nil {
		return nil, e.Err
	}
	return e.Event, nil
}
