package cluster

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Tail is the end of one tree in the log.
type Tail struct {
	// ID is the newest event id of the tree, of either family ("" for a
	// tree without events). A node that takes the tree over seeds its id
	// sequencer with it, so its ids sort after everything the previous
	// owner emitted, its streaming events (which no store holds)
	// included.
	ID string
	// Seq is the stream sequence of the tree's last message (ownership
	// markers included), 0 if none: a feed that delivered through it has
	// handed over every event the tree had.
	Seq uint64
}

// TreeTail reads the end of tree in the log: the newest message of each
// of its subjects (one consumer delivering the last message per
// subject), the newest event id among them and the sequence of the last
// one. Undecodable records are skipped.
func (l *Log) TreeTail(ctx context.Context, tree string) (Tail, error) {
	if err := ValidToken(tree); err != nil {
		return Tail{}, err
	}
	filter := TreeFilter(tree)
	last, err := l.lastOn(ctx, filter)
	if err != nil || last == 0 {
		return Tail{}, err
	}
	tail := Tail{Seq: last}
	c, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
	if err != nil {
		return Tail{}, fmt.Errorf("cluster: tail of %s: %w", tree, err)
	}
	it, err := c.Messages()
	if err != nil {
		return Tail{}, fmt.Errorf("cluster: tail of %s: %w", tree, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return Tail{}, fmt.Errorf("cluster: tail of %s: %w", tree, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return Tail{}, fmt.Errorf("cluster: tail of %s: %w", tree, err)
		}
		if e := decodeEntry(md.Sequence.Stream, m.Subject(), m.Headers(), m.Data()); e.Event != nil && e.Event.ID > tail.ID {
			tail.ID = e.Event.ID
		}
		if md.NumPending == 0 || md.Sequence.Stream >= last {
			return tail, nil
		}
	}
}

// LastTreeSeq returns the stream sequence of the newest message of
// tree, of either family (ownership markers included), 0 if none: a
// feed that delivered through it has handed over everything the log
// held for the tree when LastTreeSeq answered.
func (l *Log) LastTreeSeq(ctx context.Context, tree string) (uint64, error) {
	if err := ValidToken(tree); err != nil {
		return 0, err
	}
	seq, err := l.lastOn(ctx, TreeFilter(tree))
	if err != nil {
		return 0, fmt.Errorf("cluster: last message of %s: %w", tree, err)
	}
	return seq, nil
}
