package hub

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/protocol"
)

// TestClientQueueModel drives a Client's queue directly against a plain
// slice model: FIFO order across growth and wrap-around, overflow exactly
// on the offer that finds ClientQueue items queued (reported once), every
// later offer dropped, and an overflown queue discarded by Drain.
func TestClientQueueModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 40).Draw(rt, "limit")
		c := newClient(nil, "stream-test", "sess", filter{}, limit)
		var model []string
		overflown := false
		next := 0
		var dst []*Item
		for step := range rapid.IntRange(1, 200).Draw(rt, "steps") {
			if rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("op%d", step)) > 0 {
				// Offer a burst.
				for range rapid.IntRange(1, 2*limit+1).Draw(rt, fmt.Sprintf("burst%d", step)) {
					id := fmt.Sprintf("evt_%06d", next)
					next++
					got := c.offer(&Item{ID: id})
					want := false
					switch {
					case overflown:
					case len(model) == limit:
						overflown, want = true, true
					default:
						model = append(model, id)
					}
					if got != want {
						rt.Fatalf("offer %s: overflowed=%v, want %v (queued %d of %d)", id, got, want, len(model), limit)
					}
					if n := c.Len(); !overflown && n != len(model) {
						rt.Fatalf("Len=%d, want %d", n, len(model))
					}
					if c.Overflown() != overflown {
						rt.Fatalf("Overflown=%v, want %v", c.Overflown(), overflown)
					}
				}
				continue
			}
			var over bool
			dst, over = c.Drain(dst)
			if over != overflown {
				rt.Fatalf("Drain overflown=%v, want %v", over, overflown)
			}
			if overflown {
				if len(dst) != 0 {
					rt.Fatalf("overflown Drain returned %d items", len(dst))
				}
				if c.Len() != 0 {
					rt.Fatalf("overflown queue holds %d items after Drain", c.Len())
				}
				continue
			}
			if len(dst) != len(model) {
				rt.Fatalf("Drain returned %d items, want %d", len(dst), len(model))
			}
			for i := range dst {
				if dst[i].ID != model[i] {
					rt.Fatalf("Drain[%d]=%s, want %s", i, dst[i].ID, model[i])
				}
			}
			model = model[:0]
			if c.Len() != 0 {
				rt.Fatalf("Len=%d after Drain", c.Len())
			}
		}
	})
}

// TestClientNotify: the notify channel is signalled after an offer and
// on overflow, and never blocks the offerer however many offers precede
// a read.
func TestClientNotify(t *testing.T) {
	c := newClient(nil, "stream-test", "sess", filter{}, 2)
	select {
	case <-c.Notify():
		t.Fatal("signalled before any offer")
	default:
	}
	for i := range 3 {
		c.offer(&Item{ID: fmt.Sprint(i)}) // the third overflows; none blocks
	}
	select {
	case <-c.Notify():
	default:
		t.Fatal("not signalled after offers")
	}
	if _, over := c.Drain(nil); !over {
		t.Fatal("third offer into a queue of two did not overflow")
	}
	c.close()
	select {
	case <-c.Notify():
	default:
		t.Fatal("close did not signal")
	}
	if c.offer(&Item{ID: "x"}) || c.Len() != 0 {
		t.Fatal("closed client accepted an offer")
	}
}

// TestClientOnOverflow: the overflow hook runs exactly once, on the offer
// that overflows the queue (before that offer returns, so the writer can
// give up a stalled write at once), and at once when it is set on a client
// that has already overflowed; a closed client never calls it.
func TestClientOnOverflow(t *testing.T) {
	c := newClient(nil, "stream-test", "sess", filter{}, 2)
	calls := 0
	c.OnOverflow(func() { calls++ })
	for i := range 2 {
		if c.offer(&Item{ID: fmt.Sprint(i)}) || calls != 0 {
			t.Fatalf("offer %d within the bound: hook called %d times", i, calls)
		}
	}
	if !c.offer(&Item{ID: "2"}) || calls != 1 {
		t.Fatalf("the overflowing offer: hook called %d times, want 1", calls)
	}
	c.offer(&Item{ID: "3"})
	if calls != 1 {
		t.Fatalf("after the overflow: hook called %d times, want 1", calls)
	}

	late := 0
	c.OnOverflow(func() { late++ })
	if late != 1 {
		t.Fatalf("hook set after the overflow called %d times, want 1", late)
	}

	closed := newClient(nil, "stream-test", "sess", filter{}, 1)
	closed.OnOverflow(func() { t.Fatal("hook called on a closed client") })
	closed.close()
	closed.offer(&Item{ID: "a"})
	closed.offer(&Item{ID: "b"})
}

// TestClientQueueByteModel drives a Client bounded by events and by
// bytes against a plain model: an offer overflows when the queue holds
// max items, or when it is not empty and the item's frame would take
// the queued bytes past the byte bound (an item offered to an empty
// queue is always taken, however large); the overflow records what the
// queue held at that moment; Drain empties the byte count with the
// queue.
func TestClientQueueByteModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 30).Draw(rt, "limit")
		maxBytes := rapid.Int64Range(1, 400).Draw(rt, "maxBytes")
		c := newClient(nil, "stream-test", "sess", filter{}, limit)
		c.maxBytes = maxBytes
		var model []string
		var modelBytes int64
		overflown := false
		var want Overflow
		var dst []*Item
		for step := range rapid.IntRange(1, 150).Draw(rt, "steps") {
			if rapid.IntRange(0, 4).Draw(rt, fmt.Sprintf("op%d", step)) > 0 {
				size := rapid.IntRange(0, 120).Draw(rt, fmt.Sprintf("size%d", step))
				id := fmt.Sprintf("evt_%06d", step)
				got := c.offer(&Item{ID: id, Frame: make([]byte, size)})
				over := false
				switch {
				case overflown:
				case len(model) == limit || (len(model) > 0 && modelBytes+int64(size) > maxBytes):
					overflown, over = true, true
					want = Overflow{Events: len(model), Bytes: modelBytes}
					model, modelBytes = nil, 0
				default:
					model = append(model, id)
					modelBytes += int64(size)
				}
				if got != over {
					rt.Fatalf("offer of %d bytes: overflowed=%v, want %v (queued %d items, %d bytes; bounds %d, %d)",
						size, got, over, len(model), modelBytes, limit, maxBytes)
				}
				if !overflown && (c.Len() != len(model) || c.Bytes() != modelBytes) {
					rt.Fatalf("queue holds %d items, %d bytes; want %d, %d", c.Len(), c.Bytes(), len(model), modelBytes)
				}
				if o, ok := c.Overflow(); ok != overflown || (ok && o != want) {
					rt.Fatalf("Overflow() = %+v, %v; want %+v, %v", o, ok, want, overflown)
				}
				continue
			}
			var over bool
			dst, over = c.Drain(dst)
			if over != overflown || (!over && len(dst) != len(model)) {
				rt.Fatalf("Drain: %d items, overflown=%v; want %d, %v", len(dst), over, len(model), overflown)
			}
			model, modelBytes = model[:0], 0
			if c.Bytes() != 0 {
				rt.Fatalf("Bytes=%d after Drain", c.Bytes())
			}
		}
	})
}

// TestClientLargeFrameAlone: a frame larger than the byte bound is
// queued when the queue is empty (the client is not dropped for
// asking for it), and the next offer then overflows.
func TestClientLargeFrameAlone(t *testing.T) {
	c := newClient(nil, "stream-test", "sess", filter{}, 10)
	c.maxBytes = 100
	if c.offer(&Item{ID: "a", Frame: make([]byte, 1000)}) {
		t.Fatal("a large frame offered to an empty queue overflowed it")
	}
	if !c.offer(&Item{ID: "b", Frame: make([]byte, 1)}) {
		t.Fatal("an offer past the byte bound did not overflow")
	}
	if o, ok := c.Overflow(); !ok || o != (Overflow{Events: 1, Bytes: 1000}) {
		t.Fatalf("Overflow() = %+v, %v", o, ok)
	}
}

// TestClientResyncOverflow: a resync gives the queue up like an
// overflow, recording what it held, that it was a resync, and why.
func TestClientResyncOverflow(t *testing.T) {
	c := newClient(nil, "stream-test", "sess", filter{}, 10)
	c.offer(&Item{ID: "a", Frame: []byte("12345")})
	c.resync(protocol.ReasonOwnerChanged)
	o, ok := c.Overflow()
	if !ok || o != (Overflow{Events: 1, Bytes: 5, Resync: true, Reason: protocol.ReasonOwnerChanged}) {
		t.Fatalf("Overflow() = %+v, %v", o, ok)
	}
	if items, over := c.Drain(nil); !over || len(items) != 0 || c.Bytes() != 0 {
		t.Fatalf("Drain after resync: %d items, overflown=%v", len(items), over)
	}
}
