package tui

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/cli"
)

func TestStartServerInProcess(t *testing.T) {
	ctx := context.Background()
	srv, url, err := startServer(ctx, "127.0.0.1:0", []string{"--home", t.TempDir(), "--demo-delay", "0s"})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	defer stopServer(srv, cli.Env{Stderr: &stderr})
	c := client.New(url)
	if err := probe(ctx, c); err != nil {
		t.Fatalf("in-process server does not answer: %v", err)
	}
	s, err := openSession(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := openSession(ctx, c, s.ID); err != nil || r.ID != s.ID {
		t.Fatalf("resume: %v %v", r.ID, err)
	}
	if _, err := openSession(ctx, c, "sess_missing"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("resuming a missing session: %v", err)
	}
}

func TestRunRefusesAnUnreachableServer(t *testing.T) {
	var out, errb bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errb}
	// A non-default address that does not answer is an error, not a
	// reason to start a server.
	if code := Run(context.Background(), []string{"--server", "http://127.0.0.1:1"}, env); code != 1 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(errb.String(), "no server at http://127.0.0.1:1") {
		t.Fatalf("stderr %q", errb.String())
	}
	errb.Reset()
	if code := Run(context.Background(), []string{"extra"}, env); code != 2 {
		t.Fatalf("positional argument: exit %d", code)
	}
	if code := Run(context.Background(), []string{"--nope"}, env); code != 2 {
		t.Fatalf("unknown flag: exit %d", code)
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
