package hub_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/metis-agent/metis/internal/hub"
)

// TestEncodedOnce: an item's encoding is built once and the same bytes
// are returned to every caller, concurrent ones included; a second
// encoding of the same item is computed, not stored over the first.
func TestEncodedOnce(t *testing.T) {
	var built atomic.Int32
	head := hub.NewEncoding(func(it *hub.Item) []byte {
		built.Add(1)
		return append([]byte("head "), it.ID...)
	})
	it := &hub.Item{ID: "e1", Frame: []byte(`{}`)}
	const callers = 16
	got := make([][]byte, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { got[i] = it.Encoded(head) })
	}
	wg.Wait()
	for i, b := range got {
		if string(b) != "head e1" || unsafe.SliceData(b) != unsafe.SliceData(got[0]) {
			t.Fatalf("caller %d got %q at %p, caller 0 %p: not the shared bytes", i, b, unsafe.SliceData(b), unsafe.SliceData(got[0]))
		}
	}
	if n := built.Load(); n < 1 || n > callers {
		t.Fatalf("built %d times", n)
	}
	before := built.Load()
	for range 3 {
		it.Encoded(head)
	}
	if built.Load() != before {
		t.Fatal("built again after it was stored")
	}

	other := hub.NewEncoding(func(it *hub.Item) []byte { return []byte("other " + it.ID) })
	if b := it.Encoded(other); string(b) != "other e1" {
		t.Fatalf("other encoding %q", b)
	}
	if b := it.Encoded(head); unsafe.SliceData(b) != unsafe.SliceData(got[0]) {
		t.Fatal("the second encoding replaced the first")
	}
}
