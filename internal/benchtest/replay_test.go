package benchtest_test

import (
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/benchtest"
)

// TestReplayClientReplaysEachKind: the replay client, in its own
// process, reads the replayed events over WebSocket (metis: checking
// the ack's count; floor), and over SSE (records longer than its
// buffer included), timing each replay and summing the events' sizes.
func TestReplayClientReplaysEachKind(t *testing.T) {
	f := startFakeMetis(t, 40)
	f.extra = 10_000
	// One SSE data line past the client's 64 KiB buffer (a WebSocket
	// frame that long is past the library's read limit).
	fsse := startFakeMetis(t, 40)
	fsse.extra = 70_000
	c := benchtest.StartReplayClient(t)
	floorURL := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/floor"
	for _, cmd := range []benchtest.ReplayCmd{
		{Kind: benchtest.ReplayMetis, URL: f.srv.URL, SID: "sess_a", Types: []string{"text.delta"}, N: 40},
		{Kind: benchtest.ReplayFloor, URL: floorURL, N: 40, Keep: true},
		{Kind: benchtest.ReplaySSE, URL: fsse.srv.URL, SID: "sess_a", Types: []string{"text.delta"}, N: 40},
	} {
		src := f
		if cmd.Kind == benchtest.ReplaySSE {
			src = fsse
		}
		var want int64
		for i := range 40 {
			want += int64(len(src.eventFrame(i)))
		}
		res, _, err := c.Do(cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd.Kind, err)
		}
		wantBytes := want
		if cmd.Kind == benchtest.ReplaySSE {
			wantBytes += int64(40 * len("data: \n"))
		}
		if res.NS <= 0 || res.Bytes != wantBytes {
			t.Errorf("%s: %d ns, %d bytes, want %d", cmd.Kind, res.NS, res.Bytes, wantBytes)
		}
		if cmd.Keep != (len(res.Frames) == 40) {
			t.Errorf("%s: %d frames kept", cmd.Kind, len(res.Frames))
		}
	}
}

// TestReplayClientRetriesAndFailsClearly: with Retry the client waits
// out a node's 404s; without it the 404 is the answer; a count other
// than the one asked for, or an unknown kind, is an error, and the
// client goes on serving after each.
func TestReplayClientRetriesAndFailsClearly(t *testing.T) {
	f := startFakeMetis(t, 3)
	c := benchtest.StartReplayClient(t)
	f.mu.Lock()
	f.late = 3
	f.mu.Unlock()
	if _, _, err := c.Do(benchtest.ReplayCmd{Kind: benchtest.ReplayMetis, URL: f.srv.URL, SID: "sess_a", N: 3, Retry: true}); err != nil {
		t.Fatalf("retry: %v", err)
	}
	f.mu.Lock()
	f.late = 1
	f.mu.Unlock()
	if _, _, err := c.Do(benchtest.ReplayCmd{Kind: benchtest.ReplayMetis, URL: f.srv.URL, SID: "sess_a", N: 3}); err == nil || !strings.Contains(err.Error(), "no such session") {
		t.Errorf("no retry: %v", err)
	}
	if _, _, err := c.Do(benchtest.ReplayCmd{Kind: benchtest.ReplayMetis, URL: f.srv.URL, SID: "sess_a", N: 4}); err == nil || !strings.Contains(err.Error(), "replay_event_count 3, want 4") {
		t.Errorf("wrong count: %v", err)
	}
	if _, _, err := c.Do(benchtest.ReplayCmd{Kind: "carrier-pigeon", URL: f.srv.URL, N: 1}); err == nil || !strings.Contains(err.Error(), "no replay kind") {
		t.Errorf("unknown kind: %v", err)
	}
	if _, _, err := c.Do(benchtest.ReplayCmd{Kind: benchtest.ReplayMetis, URL: f.srv.URL, SID: "sess_a", N: 3}); err != nil {
		t.Errorf("after the errors: %v", err)
	}
}

// TestChildSpeaksLines: a child started by StartChild gets its
// environment, answers line for line, ends when its input closes, and
// an exit with an error or an unexpected line is reported.
func TestChildSpeaksLines(t *testing.T) {
	c, err := benchtest.StartChild(testChildEnv + "=1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Expect("ready"); err != nil {
		t.Fatal(err)
	}
	if err := c.Send([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if line, err := c.ReadLine(); err != nil || string(line) != "HELLO" {
		t.Fatalf("%q %v", line, err)
	}
	if err := c.Send([]byte("again")); err != nil {
		t.Fatal(err)
	}
	if err := c.Expect("HELLO"); err == nil || !strings.Contains(err.Error(), `got "AGAIN"`) {
		t.Errorf("unexpected line: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c, err = benchtest.StartChild(testChildEnv + "=1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send([]byte("fail")); err != nil {
		t.Fatal(err)
	}
	if err := c.Expect("ready"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadLine(); err == nil {
		t.Error("a line after the child exited")
	}
	if err := c.Close(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("close after exit 3: %v", err)
	}
}
