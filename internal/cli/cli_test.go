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
	cli.Tail(rctx, []string{sid, "--server", h.URL, "--since", first}, cli.Env{Stdout: &replay, Stderr: &errOut})
	if !strings.Contains(replay.String(), "turn.started") {
		t.Fatalf("replay: %s", replay.String())
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
