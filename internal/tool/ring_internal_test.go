package tool

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// TestRingReturnsWhatIsNewKeepingTheLastBytes: whatever the writes and
// reads, each read returns exactly the bytes written since the previous
// read that are among the last size written, says how many before them
// were dropped, and the counts add up.
func TestRingReturnsWhatIsNewKeepingTheLastBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, 64).Draw(t, "size")
		r := newRing(size)
		var all []byte // every byte written
		read := 0      // the model's reader position
		var lost int64
		for i := range rapid.IntRange(1, 50).Draw(t, "ops") {
			if rapid.Bool().Draw(t, "write") {
				p := rapid.SliceOfN(rapid.Byte(), 0, 3*size).Draw(t, "p")
				if n, err := r.Write(p); n != len(p) || err != nil {
					t.Fatalf("op %d: Write = %d, %v", i, n, err)
				}
				all = append(all, p...)
				continue
			}
			got, dropped := r.next()
			from := max(read, len(all)-size)
			if !bytes.Equal(got, all[from:]) || dropped != int64(from-read) {
				t.Fatalf("op %d: next = %q dropped %d, want %q dropped %d", i, got, dropped, all[from:], from-read)
			}
			lost += dropped
			read = len(all)
		}
		total, dropped := r.counts()
		if total != int64(len(all)) || dropped != lost+int64(max(0, len(all)-size-read)) {
			t.Fatalf("counts = %d, %d; want %d, %d", total, dropped, len(all), lost+int64(max(0, len(all)-size-read)))
		}
	})
}
