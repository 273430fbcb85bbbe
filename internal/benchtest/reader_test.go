package benchtest_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/benchtest"
)

func dialFloor(t *testing.T, f *fakeMetis, n int) []*websocket.Conn {
	t.Helper()
	var out []*websocket.Conn
	for range n {
		ws, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/floor", nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ws)
	}
	return out
}

// TestReaderRecordsEveryDeltaInOrder: readers count and record the
// delta frames only, in order, WaitAll and WaitGot see them all, and
// Latencies pools the recorded ones of a sequence range, sorted.
func TestReaderRecordsEveryDeltaInOrder(t *testing.T) {
	f := startFakeMetis(t, 30)
	base := time.Now()
	rs := benchtest.NewReaders(dialFloor(t, f, 2), base, 30, true)
	if failed, why := benchtest.WaitAll(rs, time.Minute); failed > 0 {
		t.Fatalf("%d failed: %s", failed, why)
	}
	if err := benchtest.WaitGot(rs, 30, time.Minute); err != nil {
		t.Fatal(err)
	}
	benchtest.CloseAll(rs)
	for _, r := range rs {
		if r.Got() != 30 || len(r.Samples()) != 30 {
			t.Fatalf("got %d, recorded %d, want 30", r.Got(), len(r.Samples()))
		}
		for i, s := range r.Samples() {
			if int(s.Seq) != i || s.At <= 0 {
				t.Fatalf("sample %d: %+v", i, s)
			}
		}
		if r.Err() == nil {
			t.Error("a closed reader has no error")
		}
	}
	emitAt := make([]int64, 30)
	lat := benchtest.Latencies(rs, emitAt, 10, 20)
	if len(lat) != 20 || !slices.IsSorted(lat) || lat[0] <= 0 {
		t.Errorf("latencies of deltas 10..19 of 2 readers: %v", lat)
	}
}

// TestReaderThatDoesNotRecordOnlyCounts: without record, a reader keeps
// no samples.
func TestReaderThatDoesNotRecordOnlyCounts(t *testing.T) {
	f := startFakeMetis(t, 10)
	rs := benchtest.NewReaders(dialFloor(t, f, 1), time.Now(), 10, false)
	select {
	case <-rs[0].Done():
	case <-time.After(time.Minute):
		t.Fatal("no 10 deltas")
	}
	benchtest.CloseAll(rs)
	if rs[0].Got() != 10 || len(rs[0].Samples()) != 0 {
		t.Errorf("got %d, recorded %d", rs[0].Got(), len(rs[0].Samples()))
	}
}

// TestWaitsReportAReaderThatEndedEarly: a connection that ends before
// the deltas wanted is a failure for WaitAll and WaitGot, not a hang.
func TestWaitsReportAReaderThatEndedEarly(t *testing.T) {
	f := startFakeMetis(t, 5)
	conns := dialFloor(t, f, 1)
	rs := benchtest.NewReaders(conns, time.Now(), 6, true)
	for rs[0].Got() < 5 {
		time.Sleep(time.Millisecond)
	}
	conns[0].CloseNow()
	failed, why := benchtest.WaitAll(rs, time.Minute)
	if failed != 1 || !strings.Contains(why, "client ended after 5 frames") {
		t.Errorf("WaitAll: %d, %q", failed, why)
	}
	if err := benchtest.WaitGot(rs, 6, time.Minute); err == nil || !strings.Contains(err.Error(), "ended after 5 of 6") {
		t.Errorf("WaitGot: %v", err)
	}
	benchtest.CloseAll(rs)
}

// TestEmitPacedKeepsTheSchedule: every delta of the range is sent, in
// order, each at or after its slot, with its time recorded; the others
// are left alone; a send's error stops it.
func TestEmitPacedKeepsTheSchedule(t *testing.T) {
	base := time.Now()
	emitAt := make([]int64, 8)
	var sent []int
	interval := 2 * time.Millisecond
	start := time.Now()
	err := benchtest.EmitPaced(base, emitAt, 3, 8, interval, func(i int) error { sent = append(sent, i); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sent, []int{3, 4, 5, 6, 7}) {
		t.Fatalf("sent %v", sent)
	}
	if time.Since(start) < 4*interval {
		t.Errorf("5 deltas at %v took %v", interval, time.Since(start))
	}
	for i, at := range emitAt {
		switch {
		case i < 3 && at != 0:
			t.Errorf("emitAt[%d] = %d, outside the range", i, at)
		case i >= 3 && at < int64(start.Sub(base))+int64(i-3)*int64(interval):
			t.Errorf("emitAt[%d] = %d, before its slot", i, at)
		}
	}
	boom := errors.New("boom")
	sent = nil
	err = benchtest.EmitPaced(base, emitAt, 0, 8, 0, func(i int) error { sent = append(sent, i); return boom })
	if !errors.Is(err, boom) || len(sent) != 1 {
		t.Errorf("error: %v after %v", err, sent)
	}
}
