package tui

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestOpenSession: the TUI creates a session in the working directory,
// resumes one by id, and says so when the id is unknown.
func TestOpenSession(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Start(t, "")
	c := client.New(srv.URL)
	if err := probe(ctx, c); err != nil {
		t.Fatalf("the server does not answer: %v", err)
	}
	s, err := openSession(ctx, c, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := openSession(ctx, c, s.ID, false); err != nil || r.ID != s.ID {
		t.Fatalf("resume: %v %v", r.ID, err)
	}
	if _, err := openSession(ctx, c, "sess_missing", false); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("resuming a missing session: %v", err)
	}
}

func TestRunRefusesAnUnreachableServer(t *testing.T) {
	var out, errb bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errb}
	// A non-default address that does not answer is an error, not a
	// reason to start a server.
	if code := Run(context.Background(), []string{"--server", "http://127.0.0.1:1"}, env, Options{StartServer: mustNotStart(t)}); code != 1 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(errb.String(), "no server at http://127.0.0.1:1") {
		t.Fatalf("stderr %q", errb.String())
	}
	errb.Reset()
	if code := Run(context.Background(), []string{"extra"}, env, Options{}); code != 2 {
		t.Fatalf("positional argument: exit %d", code)
	}
	if code := Run(context.Background(), []string{"--nope"}, env, Options{}); code != 2 {
		t.Fatalf("unknown flag: exit %d", code)
	}
}

func mustNotStart(t *testing.T) func(context.Context, string, []string) (Started, error) {
	return func(context.Context, string, []string) (Started, error) {
		t.Error("StartServer called")
		return Started{}, errors.New("not here")
	}
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8421": "127.0.0.1:8421",
		"http://localhost":      "localhost:80",
		"::bad":                 "127.0.0.1:8421",
	} {
		if got := hostPort(in); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStartedInTheHomeDirectory (issue 20, item 8): `metis` started in
// the home directory does not create a session there: it says why and
// how to go on (a project directory, or --allow-home), and exits 1;
// with --allow-home the session is created. In / it says / cannot be a
// workspace.
func TestStartedInTheHomeDirectory(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	srv := servertest.Start(t, "")
	t.Chdir(home)
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"--server", srv.URL}, cli.Env{Stdout: &out, Stderr: &errb}, Options{}); code != 1 {
		t.Fatalf("exit %d in the home directory; stderr %s", code, errb.String())
	}
	if msg := errb.String(); !strings.Contains(msg, "is your home directory") || !strings.Contains(msg, "--allow-home") {
		t.Fatalf("stderr: %s", msg)
	}
	c := client.New(srv.URL)
	if all, err := c.Sessions(context.Background()); err != nil || len(all) != 0 {
		t.Fatalf("sessions after the refusal: %d, %v", len(all), err)
	}
	s, err := openSession(context.Background(), c, "", true)
	if err != nil || s.WorkspacePath != home {
		t.Fatalf("--allow-home: %+v, %v", s, err)
	}
	t.Chdir("/")
	errb.Reset()
	if code := Run(context.Background(), []string{"--server", srv.URL}, cli.Env{Stdout: &out, Stderr: &errb}, Options{}); code != 1 || !strings.Contains(errb.String(), "/ cannot be a workspace") {
		t.Fatalf("exit %d in /; stderr %s", code, errb.String())
	}
}
