package benchtest_test

import (
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/benchtest"
)

// TestReadEventsSkipsOtherFramesAndGrowsItsBuffer: ReadEvents counts
// event frames only, sums their sizes, keeps copies if asked, and reads
// frames larger than its starting buffer whole.
func TestReadEventsSkipsOtherFramesAndGrowsItsBuffer(t *testing.T) {
	f := startFakeMetis(t, 6)
	f.extra = 10_000 // each event frame about 10 KB, past the 4 KiB buffer
	ws := dialFloor(t, f, 1)[0]
	defer ws.CloseNow()
	frames, n, err := benchtest.ReadEvents(t.Context(), ws, 6, true)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for i := range 6 {
		want += int64(len(f.eventFrame(i)))
	}
	if n != want || len(frames) != 6 {
		t.Fatalf("%d bytes in %d frames, want %d in 6", n, len(frames), want)
	}
	for i, fr := range frames {
		if string(fr) != f.eventFrame(i) {
			t.Fatalf("frame %d: %.80s...", i, fr)
		}
	}
	if !strings.HasPrefix(string(frames[5]), `{"type":"event"`) {
		t.Errorf("frame %s", frames[5])
	}
}
