package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { servertest.RemoveProcessCert() }))
}

func TestSendSessionsTail(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	ctx := context.Background()

	// tail, live, in the background.
	var tailOut, tailErr servertest.SyncBuffer
	tctx, stopTail := context.WithCancel(ctx)
	tailDone := make(chan int)
	go func() {
		tailDone <- cli.Tail(tctx, []string{sid, "--server", h.URL, "--json", "--filter", "turn.started,text.delta,turn.completed"}, cli.Env{Stdout: &tailOut, Stderr: &tailErr})
	}()
	servertest.WaitFor(t, "tail to attach", func() bool { return h.Server.Hub.Clients(sid) == 1 })

	var out, errOut bytes.Buffer
	if code := cli.Send(ctx, []string{"--server", h.URL, sid, "/echo", "hello", "from", "send"}, cli.Env{Stdout: &out, Stderr: &errOut}); code != 0 {
		t.Fatalf("send exit %d: %s", code, errOut.String())
	}
	if strings.TrimSpace(out.String()) != "hello from send" {
		t.Fatalf("send printed %q", out.String())
	}

	servertest.WaitFor(t, "tail to see the turn end", func() bool { return strings.Contains(tailOut.String(), `"turn.completed"`) })
	stopTail()
	if code := <-tailDone; code != 0 {
		t.Fatalf("tail exit %d: %s", code, tailErr.String())
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(tailOut.String()), "\n") {
		var e struct{ Type string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("tail line %q: %v", line, err)
		}
		types = append(types, e.Type)
	}
	if types[0] != "turn.started" || types[len(types)-1] != "turn.completed" || len(types) < 4 {
		t.Fatalf("tail saw %v", types)
	}

	out.Reset()
	if code := cli.Sessions(ctx, []string{"--server", h.URL}, cli.Env{Stdout: &out, Stderr: &errOut}); code != 0 || !strings.Contains(out.String(), sid) {
		t.Fatalf("sessions exit %d: %s", code, out.String())
	}

	// tail --since replays what came after a cursor, then stops on cancel.
	first := h.Live.Events(sid)[0].ID
	var replay servertest.SyncBuffer
	rctx, stopReplay := context.WithTimeout(ctx, 10*time.Second)
	defer stopReplay()
	go func() {
		servertest.WaitFor(t, "the replay", func() bool { return strings.Contains(replay.String(), "turn.completed") })
		stopReplay()
	}()
	cli.Tail(rctx, []string{sid, "--server", h.URL, "--since", first, "--events"}, cli.Env{Stdout: &replay, Stderr: &errOut})
	if !strings.Contains(replay.String(), "turn.started") {
		t.Fatalf("replay: %s", replay.String())
	}

	// By default tail reads as a chat: the message, the answer, the end;
	// no raw deltas.
	var chat servertest.SyncBuffer
	cctx, stopChat := context.WithTimeout(ctx, 10*time.Second)
	defer stopChat()
	go func() {
		servertest.WaitFor(t, "the chat replay", func() bool { return strings.Contains(chat.String(), "✓ done in") })
		stopChat()
	}()
	cli.Tail(cctx, []string{sid, "--server", h.URL, "--since", first}, cli.Env{Stdout: &chat, Stderr: &errOut})
	if got := chat.String(); !strings.Contains(got, "› /echo hello from send\nhello from send\n") ||
		strings.Contains(got, "text.delta") || strings.Contains(got, "{") {
		t.Fatalf("chat view:\n%s", got)
	}
}

func TestSendErrors(t *testing.T) {
	h := servertest.Start(t, "")
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}
	if code := cli.Send(context.Background(), []string{"--server", h.URL, "sess_nope", "hi"}, env); code != 1 {
		t.Fatalf("unknown session: exit %d", code)
	}
	if code := cli.Send(context.Background(), []string{"--server", h.URL}, env); code != 2 {
		t.Fatalf("no args: exit %d", code)
	}
	if code := cli.Sessions(context.Background(), []string{"--server", "http://127.0.0.1:1"}, env); code != 1 {
		t.Fatalf("no server: exit %d", code)
	}
}

// TestTailJoinsMidAnswer: `metis tail` started while an answer streams
// prints the answer so far first (one in_flight_message line, from the
// snapshot), then the deltas that continue it: together, the whole
// answer, nothing twice.
func TestTailJoinsMidAnswer(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.DemoDelay = 5 * time.Millisecond })
	sid := h.CreateSession()
	h.Submit(sid, "/long 100")
	servertest.WaitFor(t, "the answer to stream", func() bool {
		n := 0
		for _, e := range h.Live.Events(sid) {
			if e.Type == "text.delta" {
				n++
			}
		}
		return n >= 40
	})
	var out, errOut servertest.SyncBuffer
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- cli.Tail(ctx, []string{sid, "--server", h.URL, "--json", "--filter", "preset:chat"}, cli.Env{Stdout: &out, Stderr: &errOut})
	}()
	servertest.WaitFor(t, "tail to see the answer complete", func() bool { return strings.Contains(out.String(), `"message.complete"`) })
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("tail exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var first struct {
		InFlight struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Blocks []struct {
				Text string `json:"text"`
			} `json:"blocks"`
		} `json:"in_flight_message"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.InFlight.Status != "streaming" || len(first.InFlight.Blocks) != 1 {
		t.Fatalf("tail's first line is not the answer so far: %s (%v)", lines[0], err)
	}
	text := first.InFlight.Blocks[0].Text
	var final string
	for _, l := range lines[1:] {
		var e struct {
			Type    string
			Payload struct {
				MessageID    string `json:"message_id"`
				Text         string `json:"text"`
				FinalContent []struct {
					Text string `json:"text"`
				} `json:"final_content"`
			}
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("tail line %q: %v", l, err)
		}
		switch {
		case e.Type == "text.delta" && e.Payload.MessageID == first.InFlight.ID:
			text += e.Payload.Text
		case e.Type == "message.complete" && e.Payload.MessageID == first.InFlight.ID:
			final = e.Payload.FinalContent[0].Text
		}
	}
	if !strings.HasPrefix(text, "Sentence 1 of 100. ") || text != final {
		t.Fatalf("the answer so far and the deltas after it make %d bytes (%.40q…), the answer is %d bytes", len(text), text, len(final))
	}
}
