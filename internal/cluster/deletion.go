package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A deletion record is how a deletion (DELETE /sessions/{id}) reaches
// every node: the tree's owner deletes the session and its workers from
// its store, then publishes the record on the tree's catalog subjects,
// metis.evt.<tree>._deleted.c, fenced like its events, with the body
// {"session_id":"…"}. Every node's projection, the owner's included,
// removes that session and every worker below it from its store when
// it applies the record (store.RemoveTree), in log order: after
// everything the owner committed for the tree before. Applying it again
// (a replay, a node catching up, a duplicate) or for a session the
// store never held does nothing. A record holds no event: feeds and
// readers of events skip it, as they skip ownership markers.

// deletionRecord is the body of a deletion record.
type deletionRecord struct {
	SessionID string `json:"session_id"`
}

// decodeDeletion decodes the body of a deletion record: the deleted
// session, a valid subject token. Bodies come from the network: a
// malformed one is an error wrapping ErrRecord.
func decodeDeletion(body []byte) (string, error) {
	var d deletionRecord
	if err := decodeStrict(body, &d); err != nil {
		return "", fmt.Errorf("%w: deletion: %w", ErrRecord, err)
	}
	if err := ValidToken(d.SessionID); err != nil {
		return "", fmt.Errorf("%w: deletion: %w", ErrRecord, err)
	}
	return d.SessionID, nil
}

// PublishDeletion appends a deletion record of session (a session of
// the fenced tree, which the owner deleted from its store) to the
// tree's catalog subjects, fenced as PublishCatalog is, and returns
// once the stream acknowledged it.
func (f *Fence) PublishDeletion(ctx context.Context, session string) (Published, error) {
	if err := ValidToken(session); err != nil {
		return Published{}, fmt.Errorf("cluster: publish the deletion of %s: %w", session, err)
	}
	body, err := json.Marshal(deletionRecord{SessionID: session})
	if err != nil {
		return Published{}, fmt.Errorf("cluster: publish the deletion of %s: %w", session, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fenced != nil {
		return Published{}, f.fenced
	}
	ack, err := f.log.js.PublishMsg(ctx, &nats.Msg{Subject: deletionSubject(f.tree), Header: chainHeader(f.epoch, f.prev), Data: body},
		jetstream.WithMsgID("deleted."+session),
		jetstream.WithExpectLastSequenceForSubject(f.last, CatalogFilter(f.tree)),
		jetstream.WithExpectStream(f.log.cfg.Stream))
	if err != nil {
		if isWrongLastSeq(err) {
			f.fenced = &FencedError{Tree: f.tree, Event: "deletion of " + session, Expected: f.last, Err: err}
			return Published{}, f.fenced
		}
		return Published{}, fmt.Errorf("cluster: publish the deletion of %s: %w", session, err)
	}
	f.last = max(f.last, ack.Sequence)
	return Published{Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// PublishDeletion appends a deletion record of session to the tree's
// catalog subjects, fenced (Fence.PublishDeletion), unless the owner
// lost the tree; a fenced publish stops the owner as PublishCatalog's
// does.
func (o *Owner) PublishDeletion(ctx context.Context, session string) (Published, error) {
	if err := context.Cause(o.ctx); err != nil {
		return Published{}, fmt.Errorf("cluster: publish the deletion of %s: tree %s no longer owned: %w", session, o.Tree(), err)
	}
	p, err := o.fence.PublishDeletion(ctx, session)
	if errors.Is(err, ErrFenced) {
		o.stop(err)
		o.lease.Lose(err)
	}
	return p, err
}
