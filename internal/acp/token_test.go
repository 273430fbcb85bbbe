package acp

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/token"
)

func TestMain(m *testing.M) {
	code := m.Run()
	servertest.RemoveProcessCert()
	os.Exit(code)
}

// TestHomeTokenNotSentToAnotherServer: metis acp named a server that is
// not its home's (by --server or $METIS_SERVER: a fake TLS server the
// client trusts, asking for a token) never sends it the home's token.
func TestHomeTokenNotSentToAnotherServer(t *testing.T) {
	cert, key := servertest.ProcessCert(t)
	h := servertest.Start(t, "", func(c *config.Config) { c.TLSCert, c.TLSKey, c.PublicName = cert, key, "metis.example.com" })
	catcher := servertest.NewTokenCatcher(t, cert, key)
	t.Setenv("SSL_CERT_FILE", cert)
	t.Setenv("METIS_SERVER", "")
	t.Setenv(token.EnvVar, "")
	if err := os.Unsetenv(token.EnvVar); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		var out, errOut servertest.SyncBuffer
		if c := Run(context.Background(), args, strings.NewReader(""), &out, &errOut, Options{}); c != 1 || out.String() != "" {
			t.Fatalf("metis acp %q: exit %d, stdout %q, stderr %q", args, c, out.String(), errOut.String())
		}
	}
	run("--server", catcher.URL, "--home", h.Home)
	t.Setenv("METIS_SERVER", catcher.URL)
	run("--home", h.Home)
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
