package server_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/token"
)

func newServer(t *testing.T, mod func(*config.Config)) (*server.Server, error) {
	t.Helper()
	cfg := config.Defaults()
	cfg.Home = t.TempDir()
	cfg.Addr = "127.0.0.1:0"
	mod(&cfg)
	s, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Cleanup(func() { s.Shutdown(context.Background()) })
	}
	return s, err
}

// TestNonLoopbackAddrRequiresToken: a server whose --addr is not
// loopback generates <home>/token (0600) and refuses requests without
// it; it is not listening here (tests bind loopback only): its handler
// is called directly.
func TestNonLoopbackAddrRequiresToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.10:8421"} {
		t.Run(addr, func(t *testing.T) {
			s, err := newServer(t, func(c *config.Config) { c.Addr = addr })
			if err != nil {
				t.Fatal(err)
			}
			tf := filepath.Join(s.Config.Home, token.FileName)
			st, err := os.Stat(tf)
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("token file: %v %v", st, err)
			}
			tok, err := token.Read(tf)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				auth string
				want int
			}{{"", 401}, {"Bearer wrong-token-0123456789", 401}, {"Bearer " + tok, 200}} {
				r := httptest.NewRequest("GET", "http://127.0.0.1/sessions", nil)
				if c.auth != "" {
					r.Header.Set("Authorization", c.auth)
				}
				w := httptest.NewRecorder()
				s.Handler().ServeHTTP(w, r)
				if w.Code != c.want {
					t.Fatalf("Authorization %q: %d %s", c.auth, w.Code, w.Body)
				}
			}
		})
	}
}

// TestRemoteConfigErrors: unsafe token files, a missing --token-file,
// half a TLS configuration, a bad key pair and a bad public name stop
// the server with a clear error that never quotes the token.
func TestRemoteConfigErrors(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose")
	os.WriteFile(loose, []byte("loose-token-0123456789"), 0o600)
	os.Chmod(loose, 0o644)
	cert, key := servertest.SelfSignedCert(t, dir)
	for name, c := range map[string]struct {
		mod  func(*config.Config)
		want string
	}{
		"group-readable token file": {func(c *config.Config) { c.TokenFile = loose }, "chmod 600"},
		"missing token file":        {func(c *config.Config) { c.TokenFile = filepath.Join(dir, "nope") }, "no such file"},
		"token file is a directory": {func(c *config.Config) { c.TokenFile = dir }, "not a regular file"},
		"home token group-readable": {func(c *config.Config) {
			c.Addr = "0.0.0.0:0"
			os.WriteFile(filepath.Join(c.Home, token.FileName), []byte("loose-token-0123456789"), 0o600)
			os.Chmod(filepath.Join(c.Home, token.FileName), 0o640)
		}, "chmod 600"},
		"cert without key": {func(c *config.Config) { c.TLSCert = cert }, "--tls-cert and --tls-key go together"},
		"key without cert": {func(c *config.Config) { c.TLSKey = key }, "--tls-cert and --tls-key go together"},
		"swapped pair":     {func(c *config.Config) { c.TLSCert, c.TLSKey = key, cert }, "TLS key pair"},
		"bad public name":  {func(c *config.Config) { c.PublicName = "https://x/path" }, "--public-name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newServer(t, c.mod)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), "loose-token-0123456789") {
				t.Fatalf("the error quotes the token: %v", err)
			}
		})
	}
}

// TestReadyLineSaysWhereTheTokenIs: the ready line of a server that
// requires its token says so and names the token file, never the token.
func TestReadyLineSaysWhereTheTokenIs(t *testing.T) {
	s, err := newServer(t, func(c *config.Config) { c.PublicName = "metis.example.com" })
	if err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(s.Config.Home, token.FileName)
	tok, _ := token.Read(tf)
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, pw); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"metis serving http://127.0.0.1:", "token required", tf, "just generated", "metis.example.com"} {
		if !strings.Contains(line, want) {
			t.Errorf("ready line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, tok) {
		t.Fatalf("the ready line shows the token: %q", line)
	}

	// A loopback server's ready line says nothing of tokens or the
	// network: it ends with the dashboard's URL.
	s2, err := newServer(t, func(*config.Config) {})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw = io.Pipe()
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- s2.Run(ctx, pw); pw.Close() }()
	line, _ = bufio.NewReader(pr).ReadString('\n')
	cancel()
	go io.Copy(io.Discard, pr)
	<-done
	if strings.Contains(line, "token") || strings.Contains(line, "network") || !strings.HasSuffix(line, "/\n") {
		t.Fatalf("loopback ready line %q", line)
	}
}

// TestClientOverTLSWithToken: the Go client, given the token and a
// transport that trusts the server's certificate, runs a whole turn over
// https and wss; without the token it gets a 401 it can recognize, and
// Follow gives up at once instead of retrying.
func TestClientOverTLSWithToken(t *testing.T) {
	cert, key := servertest.SelfSignedCert(t, t.TempDir())
	h := servertest.Start(t, "", func(c *config.Config) { c.TLSCert, c.TLSKey, c.PublicName = cert, key, "metis.example.com" })
	if !strings.HasPrefix(h.URL, "https://") || h.Token == "" {
		t.Fatalf("URL %s, token %v", h.URL, h.Token != "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	anon := client.New(h.URL)
	anon.HTTP = servertest.TLSClient(t, cert)
	if _, err := anon.Sessions(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("without the token: %v", err)
	}

	c := client.New(h.URL)
	c.HTTP = servertest.TLSClient(t, cert)
	c.Token = h.Token
	s, err := c.CreateSession(ctx, h.Workspace, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := anon.Follow(ctx, s.ID, client.FollowOptions{}); !client.IsUnauthorized(err) {
		t.Fatalf("Follow without the token: %v", err)
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	turn, text := "", ""
	err = c.Follow(fctx, s.ID, client.FollowOptions{OnUpdate: func(u client.Update) {
		switch {
		case u.Kind == client.Subscribed && turn == "":
			var serr error
			if turn, serr = c.Submit(fctx, s.ID, "/echo over tls"); serr != nil {
				t.Error(serr)
				stop()
			}
		case u.Kind == client.EventApplied && turn != "" && u.View.Turn.ID == turn && u.View.Turn.Status != "in_flight":
			text = u.View.Turn.Status
			stop()
		}
	}})
	if err != context.Canceled || text != "completed" {
		t.Fatalf("Follow over wss: %v, turn %q", err, text)
	}
}

// TestAddressesRecorded: a listening server records beside its token
// the addresses it serves (the bound address, its names, the public
// names, the socket), and removes the record when it stops; the home's
// token then goes to those only (token.ForClient).
func TestAddressesRecorded(t *testing.T) {
	home := t.TempDir()
	sock := filepath.Join(home, "metis.sock")
	s, err := newServer(t, func(c *config.Config) {
		c.Home, c.Socket, c.PublicName = home, sock, "https://metis.example.com,10.0.0.7:9000"
	})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := token.ReadAddresses(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"unix://" + sock, "https://metis.example.com", "https://10.0.0.7:9000", url} {
		if !token.Serves(addrs, u) {
			t.Errorf("%s is not among the recorded addresses %+v", u, addrs)
		}
	}
	// The listener speaks plain http: its address over https is another
	// server's.
	for _, u := range []string{"https://metis.example.org", "https://10.0.0.7:9001", "unix:///elsewhere/metis.sock", strings.Replace(url, "http://", "https://", 1)} {
		if token.Serves(addrs, u) {
			t.Errorf("%s is among the recorded addresses %+v", u, addrs)
		}
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, token.AddressesFile)); !os.IsNotExist(err) {
		t.Fatalf("the addresses file outlived the server: %v", err)
	}
}
