package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// theCert is the certificate processCert hands out, in a directory
// TestMain removes.
var theCert struct {
	once           sync.Once
	dir, cert, key string
	err            error
}

// processCert returns a self-signed certificate that is the same for
// the whole test process: the system certificate pool, which
// SSL_CERT_FILE feeds, is loaded once per process, so a test run again
// (-count) must serve the certificate the pool was loaded with.
func processCert(t *testing.T) (cert, key string) {
	t.Helper()
	theCert.once.Do(func() {
		theCert.dir, theCert.err = os.MkdirTemp("", "metis-cli-test-")
		if theCert.err == nil {
			theCert.cert, theCert.key = servertest.SelfSignedCert(t, theCert.dir)
		}
	})
	if theCert.err != nil {
		t.Fatal(theCert.err)
	}
	return theCert.cert, theCert.key
}

// unsetenv removes name for the rest of the test (t.Setenv first, so it
// is restored).
func unsetenv(t *testing.T, name string) {
	t.Helper()
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}
