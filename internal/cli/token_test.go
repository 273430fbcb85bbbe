package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/token"
)

// TestCommandsSendTheToken: against a server that requires its token,
// sessions, send and tail fail with a hint without it, and work with
// --token-file or $METIS_TOKEN (send and tail over the WebSocket too).
func TestCommandsSendTheToken(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.PublicName = "metis.example.com" })
	sid := h.CreateSession()
	tf := filepath.Join(h.Home, token.FileName)
	ctx := context.Background()
	t.Setenv(token.EnvVar, "")
	unsetenv(t, token.EnvVar)

	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}
	if code := cli.Sessions(ctx, []string{"--server", h.URL}, env); code != 1 || !strings.Contains(errOut.String(), "--token-file") {
		t.Fatalf("sessions without the token: exit %d, %q", code, errOut.String())
	}
	if out.Len() != 0 {
		t.Fatalf("a refused listing printed %q (a table header with no rows)", out.String())
	}
	errOut.Reset()
	if code := cli.Send(ctx, []string{"--server", h.URL, sid, "/echo", "hi"}, env); code != 1 || !strings.Contains(errOut.String(), "401") {
		t.Fatalf("send without the token: exit %d, %q", code, errOut.String())
	}

	out.Reset()
	errOut.Reset()
	if code := cli.Sessions(ctx, []string{"--server", h.URL, "--token-file", tf}, env); code != 0 || !strings.Contains(out.String(), sid) {
		t.Fatalf("sessions --token-file: exit %d, %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := cli.Send(ctx, []string{"--server", h.URL, "--token-file", tf, sid, "/echo", "with", "a", "file"}, env); code != 0 || strings.TrimSpace(out.String()) != "with a file" {
		t.Fatalf("send --token-file: exit %d, %q %q", code, out.String(), errOut.String())
	}

	t.Setenv(token.EnvVar, h.Token)
	out.Reset()
	if code := cli.Send(ctx, []string{"--server", h.URL, sid, "/echo", "from", "the", "env"}, env); code != 0 || strings.TrimSpace(out.String()) != "from the env" {
		t.Fatalf("send with $METIS_TOKEN: exit %d, %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	tctx, stop := context.WithCancel(ctx)
	done := make(chan int)
	go func() {
		done <- cli.Tail(tctx, []string{sid, "--server", h.URL, "--since", "evt_0"}, cli.Env{Stdout: &servertest.SyncBuffer{}, Stderr: &servertest.SyncBuffer{}})
	}()
	servertest.WaitFor(t, "tail to attach with the token", func() bool { return h.Server.Hub.Clients(sid) == 1 })
	stop()
	<-done

	t.Setenv(token.EnvVar, "short")
	errOut.Reset()
	if code := cli.Sessions(ctx, []string{"--server", h.URL}, env); code != 1 || !strings.Contains(errOut.String(), "$"+token.EnvVar) {
		t.Fatalf("a bad $METIS_TOKEN: exit %d, %q", code, errOut.String())
	}
}

// TestCommandsFallBackToTheHomeToken: for an https server the commands
// read <home>/token ($METIS_HOME) when no token is given.
func TestCommandsFallBackToTheHomeToken(t *testing.T) {
	cert, key := processCert(t)
	h := servertest.Start(t, "", func(c *config.Config) { c.TLSCert, c.TLSKey, c.PublicName = cert, key, "metis.example.com" })
	t.Setenv("SSL_CERT_FILE", cert) // trust the test certificate
	t.Setenv("METIS_HOME", h.Home)
	t.Setenv(token.EnvVar, "")
	unsetenv(t, token.EnvVar)
	sid := h.CreateSession()
	var out, errOut bytes.Buffer
	if code := cli.Sessions(context.Background(), []string{"--server", h.URL}, cli.Env{Stdout: &out, Stderr: &errOut}); code != 0 || !strings.Contains(out.String(), sid) {
		t.Fatalf("sessions over https with the home token: exit %d, %q %q", code, out.String(), errOut.String())
	}
}

// processCert is the certificate of the whole test process (see
// servertest.ProcessCert); TestMain removes it.
func processCert(t *testing.T) (cert, key string) { return servertest.ProcessCert(t) }

// unsetenv removes name for the rest of the test (t.Setenv first, so it
// is restored).
func unsetenv(t *testing.T, name string) {
	t.Helper()
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}

// TestHomeTokenOnlyToItsOwnServer: the attack of a server named by
// --server or $METIS_SERVER that is not the home's own (here a fake TLS
// server with a certificate the client trusts) asking for a token. It
// gets requests, never with the local token; the home's own server,
// named the same ways, gets it.
func TestHomeTokenOnlyToItsOwnServer(t *testing.T) {
	cert, key := processCert(t)
	h := servertest.Start(t, "", func(c *config.Config) { c.TLSCert, c.TLSKey, c.PublicName = cert, key, "metis.example.com" })
	catcher := servertest.NewTokenCatcher(t, cert, key)
	t.Setenv("SSL_CERT_FILE", cert)
	t.Setenv("METIS_HOME", h.Home)
	t.Setenv("METIS_SERVER", "")
	t.Setenv(token.EnvVar, "")
	unsetenv(t, token.EnvVar)
	ctx := context.Background()
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}

	if code := cli.Sessions(ctx, []string{"--server", catcher.URL}, env); code != 1 {
		t.Fatalf("sessions --server <the catcher>: exit %d, %q", code, errOut.String())
	}
	if code := cli.Send(ctx, []string{"--server", catcher.URL, "sess_x", "hi"}, env); code != 1 {
		t.Fatalf("send --server <the catcher>: exit %d, %q", code, errOut.String())
	}
	t.Setenv("METIS_SERVER", catcher.URL)
	if code := cli.Sessions(ctx, nil, env); code != 1 {
		t.Fatalf("sessions with $METIS_SERVER the catcher: exit %d, %q", code, errOut.String())
	}
	seen := catcher.Seen()
	if len(seen) < 3 {
		t.Fatalf("the catcher got %d requests: the test did not reach it", len(seen))
	}
	for _, a := range seen {
		if strings.Contains(a, h.Token) {
			t.Fatalf("the catcher was sent the home's token: Authorization %q", a)
		}
	}

	// The home's own server, by --server and by $METIS_SERVER.
	t.Setenv("METIS_SERVER", h.URL)
	out.Reset()
	if code := cli.Sessions(ctx, nil, env); code != 0 {
		t.Fatalf("sessions with $METIS_SERVER the home's server: exit %d, %q", code, errOut.String())
	}
	if code := cli.Sessions(ctx, []string{"--server", h.URL}, env); code != 0 {
		t.Fatalf("sessions --server <the home's server>: exit %d, %q", code, errOut.String())
	}
}

// TestNoTokenOverPlainHTTPBeyondLoopback: a token given with
// --token-file or $METIS_TOKEN is not sent to an http:// server that is
// not on loopback: the command fails at once, saying why, without
// connecting (192.0.2.1 is a documentation address nobody answers on).
func TestNoTokenOverPlainHTTPBeyondLoopback(t *testing.T) {
	tf := filepath.Join(t.TempDir(), "tok")
	servertest.Must(t, os.WriteFile(tf, []byte("a-token-of-my-own-0123456789\n"), 0o600))
	t.Setenv("METIS_SERVER", "")
	t.Setenv(token.EnvVar, "")
	unsetenv(t, token.EnvVar)
	ctx := context.Background()
	check := func(args []string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := cli.Sessions(ctx, args, cli.Env{Stdout: &out, Stderr: &errOut}); code != 1 ||
			!strings.Contains(errOut.String(), "over plain http") || strings.Contains(errOut.String(), "a-token-of-my-own") {
			t.Fatalf("sessions %q: exit %d, %q", args, code, errOut.String())
		}
	}
	check([]string{"--server", "http://192.0.2.1:8421", "--token-file", tf})
	check([]string{"--server", "http://metis-box.example:8421", "--token-file", tf})
	t.Setenv(token.EnvVar, "a-token-of-my-own-0123456789")
	check([]string{"--server", "http://192.0.2.1:8421"})
}
