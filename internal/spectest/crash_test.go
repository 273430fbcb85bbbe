package spectest_test

// A real crash: the server runs in a child process (this test binary
// again, procServerEnv set), is killed with SIGKILL mid-answer and
// started again on the same home.

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// procServerEnv, when set, makes TestMain serve one metis server instead
// of running the tests. Its value is the home; the demo model streams
// with a small delay.
const procServerEnv = "METIS_SPECTEST_SERVER"

// runProcServer serves the server procServerEnv names until it is
// killed.
func runProcServer() int {
	cfg := config.Defaults()
	cfg.Home, cfg.Addr, cfg.DemoDelay = os.Getenv(procServerEnv), "127.0.0.1:0", 5*time.Millisecond
	return servertest.ServeChild(cfg)
}

// startProcServer starts a server on home in a child process and waits
// for its ready line; it is killed when the test ends.
func startProcServer(t *testing.T, home string) *servertest.Child {
	t.Helper()
	return servertest.StartChild(t, servertest.ChildOptions{Env: procServerEnv, Value: home, Home: home,
		LogName: fmt.Sprintf("server-%d.log", time.Now().UnixNano()), Name: "the server process"})
}

// TestCrashMidCallReportsStreamingGap (issue 20, item 5): a client that
// held deltas of an answer when the server was killed (SIGKILL) resumes,
// after the restart, from its last delta. Those deltas' successors died
// with the ring, so the ack must say streaming_gap: true; and the
// replay carries the end recovery gave the open model call,
// llm.call_failed (cancelled) for its message, before the turn's
// turn.cancelled (server_restart).
func TestCrashMidCallReportsStreamingGap(t *testing.T) {
	streamtest.EachTransport(t, testCrashMidCallReportsStreamingGap)
}

func testCrashMidCallReportsStreamingGap(t *testing.T, tr streamtest.Transport) {
	home := t.TempDir()
	p := startProcServer(t, home)
	sid := p.CreateSession()
	turn := p.Submit(sid, "/long 300")
	c, _, _ := streamtest.Subscribe(t, tr, p.URL, sid, readTimeout, "preset:chat", nil, false)
	var cursor, msgID string
	for n := 0; n < 20; {
		f := streamtest.NextFrame(t, c, readTimeout)
		if f.Event == nil {
			continue
		}
		if f.Event.Type == string(event.TextDelta) {
			n++
			msgID = streamtest.PayloadOf[streamtest.DeltaPayload](t, f.Event).MessageID
		}
		cursor = f.Event.ID
	}
	c.Close()
	p.Kill()

	p2 := startProcServer(t, home)
	c2, ack, _ := streamtest.Subscribe(t, tr, p2.URL, sid, readTimeout, "preset:chat", &cursor, false)
	if !ack.StreamingGap {
		t.Fatalf("resumed from delta %s after a crash mid-answer: ack %+v, want streaming_gap true", cursor, ack)
	}
	replay := streamtest.ReadEvents(t, c2, readTimeout, ack.ReplayEventCount)
	var types []string
	var failed protocol.LLMCallFailedPayload
	for _, e := range replay {
		types = append(types, e.Type)
		if e.Type == string(event.LLMCallFailed) {
			if err := json.Unmarshal(e.Payload, &failed); err != nil {
				t.Fatal(err)
			}
		}
	}
	if strings.Join(types, ",") != "llm.call_failed,turn.cancelled" || failed.MessageID != msgID || failed.ErrorClass != "cancelled" {
		t.Fatalf("replay after the crash: %v (llm.call_failed %+v), want llm.call_failed (cancelled) of %s, then turn.cancelled", types, failed, msgID)
	}
	var end protocol.TurnCancelledPayload
	if err := json.Unmarshal(replay[1].Payload, &end); err != nil || end.Reason != protocol.CancelReasonServerRestart || *replay[1].TurnID != turn {
		t.Fatalf("turn.cancelled %s, want reason server_restart for turn %s", replay[1].Payload, turn)
	}
}
