package cli_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/token"
)

// withSocket gives the harness a unix socket at <home>/metis.sock.
func withSocket(c *config.Config) { c.Socket = filepath.Join(c.Home, config.SocketName) }

// TestCommandsUseTheSocket: with no --server and no $METIS_SERVER, the
// commands talk to the server answering on <home>/metis.sock: sessions
// over HTTP, send over HTTP and the WebSocket stream. (The harness's TCP
// port is a random one, not the default the commands would fall back
// to.)
func TestCommandsUseTheSocket(t *testing.T) {
	h := servertest.Start(t, "", withSocket)
	t.Setenv("METIS_HOME", h.Home)
	t.Setenv("METIS_SERVER", "")
	t.Setenv(token.EnvVar, "")
	unsetenv(t, token.EnvVar)
	sid := h.CreateSession()
	ctx := context.Background()
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}
	if code := cli.Sessions(ctx, nil, env); code != 0 || !strings.Contains(out.String(), sid) {
		t.Fatalf("sessions over the socket: exit %d, %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := cli.Send(ctx, []string{sid, "/echo", "over", "the", "socket"}, env); code != 0 || strings.TrimSpace(out.String()) != "over the socket" {
		t.Fatalf("send over the socket: exit %d, %q %q", code, out.String(), errOut.String())
	}
}

// TestCommandsOverTheSocketSendTheHomeToken: a server that requires its
// token requires it over the socket too; the commands, finding the
// socket of this user's, send <home>/token and work, and a wrong
// $METIS_TOKEN is refused with a hint.
func TestCommandsOverTheSocketSendTheHomeToken(t *testing.T) {
	h := servertest.Start(t, "", withSocket, func(c *config.Config) { c.PublicName = "metis.example.com" })
	if h.Token == "" {
		t.Fatal("the server requires no token")
	}
	t.Setenv("METIS_HOME", h.Home)
	t.Setenv("METIS_SERVER", "")
	t.Setenv(token.EnvVar, "")
	unsetenv(t, token.EnvVar)
	sid := h.CreateSession()
	ctx := context.Background()
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}
	if code := cli.Send(ctx, []string{sid, "/echo", "with", "the", "token"}, env); code != 0 || strings.TrimSpace(out.String()) != "with the token" {
		t.Fatalf("send over the socket with the home token: exit %d, %q %q", code, out.String(), errOut.String())
	}
	t.Setenv(token.EnvVar, "wrong-token-0123456789")
	out.Reset()
	if code := cli.Sessions(ctx, nil, env); code != 1 || !strings.Contains(errOut.String(), "401") || !strings.Contains(errOut.String(), "$"+token.EnvVar) {
		t.Fatalf("a wrong token over the socket: exit %d, %q %q", code, out.String(), errOut.String())
	}
}
