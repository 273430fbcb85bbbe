package event

import (
	"testing"

	"github.com/oklog/ulid/v2"
	"pgregory.net/rapid"
)

// TestIDBeforeIsTheIDJustBelow: IDBefore gives a canonical id that sorts
// before the id, with no id between the two (one more is the id again),
// across borrows of every width.
func TestIDBeforeIsTheIDJustBelow(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var u ulid.ULID
		copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "bytes"))
		u[0] &= 0x7f // a ULID's time fits 48 bits; keep clear of the largest
		// Trailing zero bytes make the borrow run further.
		for i := 15; i >= 16-rapid.IntRange(0, 15).Draw(rt, "zeros"); i-- {
			u[i] = 0
		}
		if u == (ulid.ULID{}) {
			u[15] = 1
		}
		id := IDPrefix + u.String()
		before, err := IDBefore(id)
		if err != nil {
			rt.Fatal(err)
		}
		if before >= id {
			rt.Fatalf("IDBefore(%s) = %s, not before it", id, before)
		}
		b, err := ParseID(before)
		if err != nil {
			rt.Fatalf("IDBefore(%s) = %s: %v", id, before, err)
		}
		for i := 15; i >= 0; i-- { // one more
			b[i]++
			if b[i] != 0 {
				break
			}
		}
		if b != u {
			rt.Fatalf("IDBefore(%s) = %s, and one more is %s", id, before, IDPrefix+b.String())
		}
	})
	if _, err := IDBefore(IDPrefix + (ulid.ULID{}).String()); err == nil {
		t.Fatal("the smallest id has an id before it")
	}
	if _, err := IDBefore("evt_nope"); err == nil {
		t.Fatal("IDBefore accepted what is not an id")
	}
}
