package cluster

import (
	"strconv"

	"github.com/nats-io/nats.go"
)

// Ownership epochs and the publish chain (docs/scale-out.md,
// "Fencing").
//
// Every message an owner publishes carries two headers besides the
// event's bytes:
//
//   - Metis-Epoch: the stream sequence of the owner's ownership marker,
//     its epoch. Markers are appended in the order nodes took the tree,
//     so a later owner's epoch is larger. A reader that has seen a
//     newer marker of the tree than an event's epoch drops the event: it
//     is a deposed owner's, sent after its successor took the tree (a
//     paused node that wakes up). Catalog events never are (the stream
//     refuses them: the fence); streaming events are not fenced, and
//     the epoch is what keeps a deposed owner's late deltas from every
//     node's clients.
//   - Metis-Prev: the id of the event the owner published into the tree
//     just before this one (of either family; for its first, the
//     newest event of the tree when it took it). A reader that relayed
//     the tree up to id L and gets an event whose Prev is after L knows
//     that the events in between never reached the log (a streaming
//     publish the stream lost with its leader, or refused): a gap, which
//     it tells its clients about instead of hiding it.
const (
	hdrEpoch = "Metis-Epoch"
	hdrPrev  = "Metis-Prev"
)

// chainHeader returns the headers of a message of epoch whose previous
// event in the tree was prev.
func chainHeader(epoch uint64, prev string) nats.Header {
	h := nats.Header{}
	h.Set(hdrEpoch, strconv.FormatUint(epoch, 10))
	if prev != "" {
		h.Set(hdrPrev, prev)
	}
	return h
}

// chainOf reads a message's epoch and previous event (0 and "" for a
// message without them: written by a tool, or by an older node).
func chainOf(h nats.Header) (epoch uint64, prev string) {
	if h == nil {
		return 0, ""
	}
	epoch, _ = strconv.ParseUint(h.Get(hdrEpoch), 10, 64)
	return epoch, h.Get(hdrPrev)
}

// Deposed reports whether an entry was published by an owner that had
// been deposed when it was written: its epoch is older than epoch, the
// newest ownership marker of its tree before it in the stream.
func (e Entry) Deposed(epoch uint64) bool {
	return e.Epoch != 0 && e.Epoch < epoch
}
