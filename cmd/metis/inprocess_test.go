package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/metis-agent/metis/client"
)

// TestStartInProcess: the server a client command starts in-process
// answers the API at the URL it reports, with the flags it was given,
// and stops with stop.
func TestStartInProcess(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	p, err := startInProcess(ctx, "127.0.0.1:0", []string{"--home", home, "--demo-delay", "0s"}, "test-server.log")
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	stopped := false
	defer func() {
		if !stopped {
			p.stop(&stderr)
		}
	}()
	if p.TokenFile != "" {
		t.Errorf("a loopback server asks for a token file: %q", p.TokenFile)
	}
	c := client.New(p.URL)
	s, err := c.CreateSession(ctx, home, "")
	if err != nil {
		t.Fatalf("the in-process server does not answer: %v", err)
	}
	if s.ID == "" || s.WorkspacePath != home {
		t.Errorf("session %+v", s)
	}
	p.stop(&stderr)
	stopped = true
	if stderr.Len() > 0 {
		t.Errorf("stop: %s", stderr.String())
	}
	if _, err := http.Get(p.URL + "/sessions"); err == nil {
		t.Error("the server still answers after stop")
	}
}
