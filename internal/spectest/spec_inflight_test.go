package spectest_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

// TestContract11_MidStreamSnapshot is contract §11's first bullet as a
// property, over each transport: a client that attaches with snapshot:
// true at any moment of a streamed assistant message (thinking, text,
// tool input) finds it in the snapshot's messages with status
// streaming, and its content there followed by the deltas after the
// seam is exactly message.complete's final content. Turns run back to
// back in the background (builtin:demo streams thinking, text and a
// tool call's input, then a second answer; a /tool prompt streams a
// longer input); each check attaches after a drawn pause and reads to
// the end of the message in flight, or of the next one when none was.
func TestContract11_MidStreamSnapshot(t *testing.T) {
	streamtest.EachTransport(t, testMidStreamSnapshot)
}

func testMidStreamSnapshot(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "", demoDelay(2*time.Millisecond))
	sid := h.CreateSession()
	prompts := []string{
		"what is in my workspace?",
		"/long 40",
		`/tool read_file {"path": "a/rather/long/path/to/a/file/that/is/not/there.txt"}`,
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	driverErr := make(chan error, 1)
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			if st := h.Do("POST", "/sessions/"+sid+"/turns", map[string]string{"content": prompts[i%len(prompts)]}, nil); st != http.StatusAccepted {
				driverErr <- &statusError{st}
				return
			}
			if err := h.Server.Sessions.Wait(context.Background(), sid); err != nil {
				driverErr <- err
				return
			}
		}
	})
	defer func() {
		stop()
		wg.Wait()
		select {
		case err := <-driverErr:
			t.Fatalf("the turns driver stopped: %v", err)
		default:
		}
	}()
	inFlight, checks := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		time.Sleep(time.Duration(rapid.IntRange(0, 40).Draw(rt, "pauseMs")) * time.Millisecond)
		filter := rapid.SampledFrom([]string{"preset:chat", "preset:full"}).Draw(rt, "filter")
		c := tr.Connect(t, h.URL, sid, nil)
		defer c.Close()
		_, snap := streamtest.SubscribeOn(t, c, readTimeout, filter, nil, true)
		if streamtest.CheckContinues(rt, c, readTimeout, snap) {
			inFlight++
		}
		checks++
	})
	t.Logf("%d of %d snapshots were taken while a message streamed", inFlight, checks)
	if inFlight == 0 {
		t.Fatal("no snapshot was taken while a message streamed: the test did not exercise the property")
	}
}

type statusError struct{ status int }

func (e *statusError) Error() string { return http.StatusText(e.status) }
