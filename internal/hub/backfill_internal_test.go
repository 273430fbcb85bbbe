package hub

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/event"
)

// TestRingMergeModel: merging a backfill (every streaming event from a
// bound on) into a ring keeps, in id order and once each, the held
// items from the bound on and the backfilled ones; older held items are
// let go and remembered as lost; the size bound holds; and the ring's
// byte count is what it holds.
func TestRingMergeModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.IntRange(1, 12).Draw(rt, "size")
		id := func(n int) string { return fmt.Sprintf("evt_%04d", n) }
		item := func(n int) *Item {
			return &Item{ID: id(n), Type: event.TextDelta, Actor: event.ActorModel, Frame: []byte(id(n))}
		}
		var r ring
		heldLo := rapid.IntRange(0, 30).Draw(rt, "heldLo")
		heldN := rapid.IntRange(0, 10).Draw(rt, "heldN")
		for n := heldLo; n < heldLo+heldN; n++ {
			r.push(item(n), size)
		}
		before := r.bytes
		lo := rapid.IntRange(0, 40).Draw(rt, "lo")
		hi := rapid.IntRange(lo, lo+15).Draw(rt, "hi")
		var items []*Item
		for n := lo; n <= hi; n++ {
			items = append(items, item(n))
		}
		bound := id(rapid.IntRange(lo-5, lo).Draw(rt, "bound"))
		if rapid.Bool().Draw(rt, "empty") {
			items = nil
		}
		heldBefore := slices.Clone(r.items[r.start:])
		delta := r.merge(bound, items, size)

		var want []string
		for _, it := range heldBefore {
			if it.ID >= bound {
				want = append(want, it.ID)
			}
		}
		for _, it := range items {
			if !slices.Contains(want, it.ID) {
				want = append(want, it.ID)
			}
		}
		slices.Sort(want)
		lostWant := ""
		if len(want) > size {
			lostWant = want[len(want)-size-1]
			want = want[len(want)-size:]
		}
		for _, it := range heldBefore {
			if it.ID < bound {
				lostWant = max(lostWant, it.ID)
			}
		}
		var got []string
		var bytes int64
		for _, it := range r.items[r.start:] {
			got = append(got, it.ID)
			bytes += cost(it)
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("ring holds %v, want %v", got, want)
		}
		if r.bytes != bytes || before+delta != bytes {
			rt.Fatalf("bytes %d (before %d, delta %d), held items cost %d", r.bytes, before, delta, bytes)
		}
		all := &filter{types: map[event.Type]bool{event.TextDelta: true}}
		if lost := r.lost(all); lost < lostWant {
			rt.Fatalf("lost %q, want at least %q", lost, lostWant)
		}
	})
}
