package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// ErrFenced is wrapped by a catalog publish the stream refused because
// the tree's catalog subjects moved past what the publisher last wrote:
// another node owns the tree now.
var ErrFenced = errors.New("cluster: fenced: another node wrote the tree")

// FencedError is the typed form of a refused publish.
type FencedError struct {
	Tree     string
	Event    string // the refused event's id ("" for an ownership marker)
	Expected uint64 // the sequence the publisher expected to be the tree's last
	Err      error  // the stream's answer
}

func (e *FencedError) Error() string {
	what := e.Event
	if what == "" {
		what = "ownership marker"
	}
	return fmt.Sprintf("cluster: fenced: %s of tree %s refused (expected last catalog sequence %d): %v", what, e.Tree, e.Expected, e.Err)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

func (e *FencedError) Unwrap() error { return e.Err }

// Fence is the write side of one tree for its owner: every catalog
// publish expects the tree's catalog subjects to end at the sequence of
// the fence's own last publish, so a write by anyone else (a new owner's
// marker, to begin with) makes the next publish fail with ErrFenced.
// Publishes through a fence are serialised.
type Fence struct {
	log  *Log
	tree string

	mu     sync.Mutex
	last   uint64
	fenced error  // the first refusal; every later publish fails with it
	epoch  uint64 // the stream sequence of the fence's ownership marker
	prev   string // the last event published through the fence (epoch.go)
}

// ownerMarker is the body of an ownership marker.
type ownerMarker struct {
	Node     string `json:"node"`
	Revision uint64 `json:"lease_revision"`
}

// Claim takes the write side of tree: it reads the last sequence of the
// tree's catalog subjects and publishes an ownership marker expecting
// it, so that any earlier owner's next publish is refused. The caller
// must hold the tree's lease (revision is its revision, recorded in the
// marker). A concurrent writer makes Claim fail with ErrFenced; the
// caller may read again and retry while it still holds the lease.
func (l *Log) Claim(ctx context.Context, tree, node string, revision uint64) (*Fence, error) {
	last, err := l.LastCatalogSeq(ctx, tree)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(ownerMarker{Node: node, Revision: revision})
	if err != nil {
		return nil, fmt.Errorf("cluster: claim %s: %w", tree, err)
	}
	ack, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: ownerSubject(tree), Data: body},
		jetstream.WithExpectLastSequenceForSubject(last, CatalogFilter(tree)),
		jetstream.WithExpectStream(l.cfg.Stream))
	if err != nil {
		if isWrongLastSeq(err) {
			return nil, &FencedError{Tree: tree, Expected: last, Err: err}
		}
		return nil, fmt.Errorf("cluster: claim %s: %w", tree, err)
	}
	return &Fence{log: l, tree: tree, last: ack.Sequence, epoch: ack.Sequence}, nil
}

// Epoch returns the fence's ownership epoch: the stream sequence of its
// ownership marker.
func (f *Fence) Epoch() uint64 { return f.epoch }

// Follow tells the fence the newest event of the tree before its own
// (the tail a new owner read when it took the tree), which its first
// publish names as its previous event (epoch.go).
func (f *Fence) Follow(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prev = max(f.prev, id)
}

// Tree returns the fenced tree.
func (f *Fence) Tree() string { return f.tree }

// Last returns the sequence of the fence's last catalog write.
func (f *Fence) Last() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// PublishCatalog appends a catalog event of the fenced tree with the
// store ops of its group, and returns once the stream acknowledged it
// (with replicas, once a quorum stored it). A refusal returns a
// *FencedError (errors.Is ErrFenced) and fences every later publish
// too. A retried event already in the stream is acknowledged as a
// duplicate with its original sequence.
func (f *Fence) PublishCatalog(ctx context.Context, ev *event.Event, ops []store.Op) (Published, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fenced != nil {
		return Published{}, f.fenced
	}
	p, err := f.log.publishCatalog(ctx, f.tree, ev, ops, chainHeader(f.epoch, f.prev),
		jetstream.WithExpectLastSequenceForSubject(f.last, CatalogFilter(f.tree)))
	if err != nil {
		if isWrongLastSeq(err) {
			f.fenced = &FencedError{Tree: f.tree, Event: ev.ID, Expected: f.last, Err: err}
			return Published{}, f.fenced
		}
		return Published{}, err
	}
	f.last = max(f.last, p.Seq)
	f.prev = max(f.prev, ev.ID)
	return p, nil
}

// PublishStreamingAsync sends a streaming event of the fenced tree
// without waiting for its acknowledgement (Log.PublishStreamingAsync),
// with the fence's epoch and chain: the event is not fenced by the
// stream, readers drop it if a newer owner's marker came before it.
func (f *Fence) PublishStreamingAsync(ev *event.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fenced != nil {
		return f.fenced
	}
	if err := f.log.publishStreamingAsync(f.tree, ev, chainHeader(f.epoch, f.prev)); err != nil {
		return err
	}
	f.prev = max(f.prev, ev.ID)
	return nil
}

// isWrongLastSeq reports a stream's refusal of an expected last
// sequence: 10071, or 10164 from replicated streams.
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
