package tui

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/token"
)

// TestHomeTokenNotSentToAnotherServer: the TUI named a server that is
// not its home's (by --server or $METIS_SERVER: a fake TLS server the
// client trusts, asking for a token) never sends it the home's token.
func TestHomeTokenNotSentToAnotherServer(t *testing.T) {
	cert, key := servertest.ProcessCert(t)
	h := servertest.Start(t, "", func(c *config.Config) { c.TLSCert, c.TLSKey, c.PublicName = cert, key, "metis.example.com" })
	catcher := servertest.NewTokenCatcher(t, cert, key)
	t.Setenv("SSL_CERT_FILE", cert)
	t.Setenv("METIS_HOME", h.Home)
	t.Setenv("METIS_SERVER", "")
	t.Setenv(token.EnvVar, "")
	if err := os.Unsetenv(token.EnvVar); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errb}
	if code := Run(context.Background(), []string{"--server", catcher.URL, "--home", h.Home}, env, Options{StartServer: mustNotStart(t)}); code != 1 {
		t.Fatalf("--server <the catcher>: exit %d, %q", code, errb.String())
	}
	t.Setenv("METIS_SERVER", catcher.URL)
	if code := Run(context.Background(), []string{"--home", h.Home}, env, Options{StartServer: mustNotStart(t)}); code != 1 {
		t.Fatalf("$METIS_SERVER the catcher: exit %d, %q", code, errb.String())
	}
	seen := catcher.Seen()
	if len(seen) < 2 {
		t.Fatalf("the catcher got %d requests", len(seen))
	}
	for _, a := range seen {
		if strings.Contains(a, h.Token) {
			t.Fatalf("the catcher was sent the home's token: %q", a)
		}
	}
}
