package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestNewCreatesASessionAndPrintsItsID: `metis new DIR` prints the id of
// a session whose workspace is DIR, and nothing else on stdout, so
// SID=$(metis new) works; the sessions table shows its last activity.
func TestNewCreatesASessionAndPrintsItsID(t *testing.T) {
	h := servertest.Start(t, "")
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}
	if code := cli.New(context.Background(), []string{"--server", h.URL, dir, "--mode", "plan"}, env); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	id := strings.TrimSpace(out.String())
	if !strings.HasPrefix(id, "sess_") || strings.Contains(id, "\n") {
		t.Fatalf("stdout %q", out.String())
	}
	c := client.New(h.URL)
	a, err := c.Attach(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Session.Mode != "plan" || !strings.HasSuffix(a.Session.WorkspacePath, strings.TrimPrefix(dir, "/private")) {
		t.Fatalf("session %+v", a.Session)
	}
	if !strings.Contains(errOut.String(), "metis send "+id) {
		t.Fatalf("stderr %q lacks the next step", errOut.String())
	}

	out.Reset()
	if code := cli.Sessions(context.Background(), []string{"--server", h.URL}, env); code != 0 {
		t.Fatalf("sessions exit %d", code)
	}
	if lines := strings.Split(out.String(), "\n"); !strings.Contains(lines[0], "LAST ACTIVITY") || !strings.Contains(lines[1], "just now") {
		t.Fatalf("sessions:\n%s", out.String())
	}

	// A directory that does not exist is refused before the server is asked.
	errOut.Reset()
	if code := cli.New(context.Background(), []string{"--server", h.URL, dir + "/nope"}, env); code != 2 {
		t.Fatalf("missing dir: exit %d", code)
	}
}

// TestErrorsDoNotRepeatTheirPrefix: an API error reads "metis send: 404
// session_not_found: …", not "metis send: metis: 404 …".
func TestErrorsDoNotRepeatTheirPrefix(t *testing.T) {
	h := servertest.Start(t, "")
	var out, errOut bytes.Buffer
	if code := cli.Send(context.Background(), []string{"--server", h.URL, "sess_nope", "hi"}, cli.Env{Stdout: &out, Stderr: &errOut}); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if got := errOut.String(); got != "metis send: the session does not exist\n" {
		t.Fatalf("stderr %q", got)
	}
	api := &client.APIError{Status: 409, Code: "turn_in_flight", Message: "a turn is running"}
	for err, want := range map[error]string{
		api:                                   "409 turn_in_flight: a turn is running",
		fmt.Errorf("submit: %w", api):         "submit: 409 turn_in_flight: a turn is running",
		fmt.Errorf("metis: dial: %w", io.EOF): "dial: EOF",
	} {
		if got := cli.ErrText(err); got != want {
			t.Errorf("ErrText(%q) = %q, want %q", err, got, want)
		}
	}
}

// TestInterruptedSendCancelsTheTurn: ctrl-c on `metis send` (its
// context ends) cancels the turn on the server and exits 130.
func TestInterruptedSendCancelsTheTurn(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.DemoDelay = 5 * time.Millisecond })
	sid := h.CreateSession()
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	var out, errOut servertest.SyncBuffer
	done := make(chan int)
	go func() {
		done <- cli.Send(ctx, []string{"--server", h.URL, sid, "/long", "5000"}, cli.Env{Stdout: &out, Stderr: &errOut})
	}()
	servertest.WaitFor(t, "the answer to stream", func() bool { return strings.Contains(out.String(), "Sentence 2 of") })
	interrupt()
	if code := <-done; code != 130 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	servertest.WaitFor(t, "turn.cancelled", func() bool {
		for _, e := range h.Live.Events(sid) {
			if e.Type == "turn.cancelled" {
				return true
			}
		}
		return false
	})
	if !strings.Contains(errOut.String(), "cancelled") {
		t.Fatalf("stderr %q", errOut.String())
	}
}
