package client_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/client"
)

// listenSocket listens on a unix socket at path until the test ends
// (nobody accepts: the kernel's backlog answers a connect).
func listenSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
}

// TestLocate: an explicit server wins, then $METIS_SERVER, then the home's
// socket when something answers on it, then the fallback (TCP). A
// socket file nobody answers on (a server killed) and a file that is no
// socket are passed over.
func TestLocate(t *testing.T) {
	ctx := context.Background()
	live := t.TempDir()
	liveSock := filepath.Join(live, client.SocketName)
	listenSocket(t, liveSock)
	stale := t.TempDir()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(stale, client.SocketName), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	notSock := t.TempDir()
	if err := os.WriteFile(filepath.Join(notSock, client.SocketName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()

	for name, c := range map[string]struct {
		env  string // $METIS_SERVER
		o    client.LocateOptions
		want string
	}{
		"explicit beats all":      {"http://env:1", client.LocateOptions{Server: "http://flag:1", Home: live}, "http://flag:1"},
		"env beats the socket":    {"http://env:1", client.LocateOptions{Home: live}, "http://env:1"},
		"live socket":             {"", client.LocateOptions{Home: live}, "unix://" + liveSock},
		"live socket, fallback":   {"", client.LocateOptions{Home: live, Fallback: "http://127.0.0.1:9"}, "unix://" + liveSock},
		"stale socket":            {"", client.LocateOptions{Home: stale}, client.DefaultServer},
		"not a socket":            {"", client.LocateOptions{Home: notSock}, client.DefaultServer},
		"no socket":               {"", client.LocateOptions{Home: empty}, client.DefaultServer},
		"no socket, own fallback": {"", client.LocateOptions{Home: empty, Fallback: "http://127.0.0.1:9"}, "http://127.0.0.1:9"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("METIS_SERVER", c.env)
			if got := client.Locate(ctx, c.o); got != c.want {
				t.Fatalf("Locate(%+v) = %q, want %q", c.o, got, c.want)
			}
		})
	}

	// Home "" is $METIS_HOME.
	t.Setenv("METIS_SERVER", "")
	t.Setenv("METIS_HOME", live)
	if got := client.Locate(ctx, client.LocateOptions{}); got != "unix://"+liveSock {
		t.Fatalf("Locate with $METIS_HOME: %q", got)
	}
	// Every URL Locate returns makes a client of that socket.
	if c := client.New(client.Locate(ctx, client.LocateOptions{})); c.SocketPath() != liveSock {
		t.Fatalf("New(Locate()) talks to %q", c.SocketPath())
	}
}

func TestParseSocketURL(t *testing.T) {
	for in, want := range map[string]string{
		"unix:///home/me/.metis/metis.sock":           "/home/me/.metis/metis.sock",
		"unix://localhost/run/metis.sock":             "/run/metis.sock",
		"unix:relative/metis.sock":                    "relative/metis.sock",
		"UNIX:///x.sock":                              "/x.sock",
		"unix:///with%20space/m.sock":                 "/with space/m.sock",
		client.SocketURL("/with space/and#hash.sock"): "/with space/and#hash.sock",
	} {
		if got, ok := client.ParseSocketURL(in); !ok || got != want {
			t.Errorf("ParseSocketURL(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"http://127.0.0.1:8421", "unix://", "unix://otherhost/x.sock", "unix:", "https://localhost/x.sock", "::"} {
		if got, ok := client.ParseSocketURL(in); ok {
			t.Errorf("ParseSocketURL(%q) = %q, want no socket", in, got)
		}
	}
	if c := client.New("http://127.0.0.1:8421/"); c.SocketPath() != "" || c.BaseURL != "http://127.0.0.1:8421" {
		t.Errorf("a TCP client: socket %q, base %q", c.SocketPath(), c.BaseURL)
	}
}

// FuzzParseSocketURL: any string is parsed without a panic, and the URL
// SocketURL makes of a path gives that path back.
func FuzzParseSocketURL(f *testing.F) {
	for _, s := range []string{"unix:///home/me/.metis/metis.sock", "unix:rel/m.sock", "unix://localhost/x", "unix://h/x", "http://127.0.0.1:8421", "unix:", "unix:///%zz", "/plain/path", "unix:///a b/c#d?e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if p, ok := client.ParseSocketURL(s); ok && p == "" {
			t.Fatalf("ParseSocketURL(%q) = \"\", true", s)
		}
		if !strings.HasPrefix(s, "/") {
			return
		}
		if p, ok := client.ParseSocketURL(client.SocketURL(s)); !ok || p != s {
			t.Fatalf("ParseSocketURL(SocketURL(%q)) = %q, %v", s, p, ok)
		}
	})
}
