package feed

import (
	"context"
	"slices"
	"testing"
)

// TestHoldIsReleasedOnceByWhoeverHasIt: a hold runs what was added once,
// the last added first; a taken hold is left to its taker by
// ReleaseUnlessTaken; a context without a hold gives nil, whose Release
// does nothing.
func TestHoldIsReleasedOnceByWhoeverHasIt(t *testing.T) {
	var ran []string
	ctx, h := WithHold(context.Background())
	h.Add(func() { ran = append(ran, "first") })
	h.Add(func() { ran = append(ran, "second") })
	taken := TakeHold(ctx)
	if taken != h {
		t.Fatal("TakeHold did not return the context's hold")
	}
	h.ReleaseUnlessTaken()
	if len(ran) != 0 {
		t.Fatalf("a taken hold was released by its maker: %v", ran)
	}
	taken.Release()
	taken.Release()
	if want := []string{"second", "first"}; !slices.Equal(ran, want) {
		t.Fatalf("released %v, want %v once", ran, want)
	}

	ran = nil
	_, untaken := WithHold(context.Background())
	untaken.Add(func() { ran = append(ran, "left") })
	untaken.ReleaseUnlessTaken()
	if !slices.Equal(ran, []string{"left"}) {
		t.Fatalf("an untaken hold released %v, want [left]", ran)
	}

	none := TakeHold(context.Background())
	if none != nil {
		t.Fatal("a context without a hold gave one")
	}
	none.Release() // a nil hold does nothing
}
