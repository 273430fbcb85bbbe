package acp

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// With no --server and no $METIS_SERVER, Run talks to the server that
// answers on <home>/metis.sock (--home here), HTTP calls and stream
// alike, and starts no server of its own.
func TestRunUsesTheSocket(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "", func(c *config.Config) { c.Socket = filepath.Join(c.Home, config.SocketName) })
	t.Setenv("METIS_SERVER", "")
	start := func(context.Context, string, []string) (func(), error) {
		t.Error("Run started a server although one answers on the socket")
		return func() {}, nil
	}
	if c, stderr := runEcho(t, []string{"--home", h.Home, "--log-level", "warn"}, start, func() string { return h.Workspace }, "over the socket"); c != 0 {
		t.Errorf("exit %d; stderr %s", c, stderr)
	}
}
