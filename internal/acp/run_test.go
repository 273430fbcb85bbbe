package acp

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// With no server at the default address, Run starts one in-process
// through Options.StartServer, serves the editor over it, and stops it
// when stdin closes; stdout carries protocol messages only.
func TestRunStartsAServerInProcess(t *testing.T) {
	leakCheck(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a free port nobody answers on
	old := defaultServer
	defaultServer = "http://" + addr
	t.Cleanup(func() { defaultServer = old })
	t.Setenv("METIS_SERVER", "")
	t.Setenv("METIS_HOME", t.TempDir()) // no socket of a server running here

	var h *servertest.Harness
	stopped := false
	start := func(_ context.Context, a string, args []string) (func(), error) {
		if a != addr || len(args) != 2 || args[0] != "--demo-delay" {
			t.Errorf("StartServer(%q, %q)", a, args)
		}
		h = servertest.Start(t, "", func(c *config.Config) { c.Addr = a })
		return func() { stopped = true; h.Stop() }, nil
	}
	if c, stderr := runEcho(t, []string{"--demo-delay", "0s", "--log-level", "warn"}, start, func() string { return h.Workspace }, "in process"); c != 0 || !stopped {
		t.Errorf("exit %d, server stopped %v; stderr %s", c, stopped, stderr)
	}
}

// An explicit --server that does not answer is an error (exit 1, a
// message on stderr, nothing on stdout); bad flags exit 2.
func TestRunErrors(t *testing.T) {
	var out, errOut servertest.SyncBuffer
	if c := Run(context.Background(), []string{"--server", "http://127.0.0.1:1"}, strings.NewReader(""), &out, &errOut, Options{}); c != 1 ||
		out.String() != "" || !strings.Contains(errOut.String(), "no server at http://127.0.0.1:1") {
		t.Errorf("unreachable server: exit %d, stdout %q, stderr %q", c, out.String(), errOut.String())
	}
	if c := Run(context.Background(), []string{"--nope"}, strings.NewReader(""), &out, &errOut, Options{}); c != 2 || out.String() != "" {
		t.Errorf("bad flag: exit %d, stdout %q", c, out.String())
	}
}
