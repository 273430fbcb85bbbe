package token

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestForClientOverASocket: over a unix socket of this user's that the
// home's server recorded the home token is sent (the socket's owner is
// whoever created it: a server of this user's); a socket of this user's
// that the home's server does not serve, a socket of another user's
// (unless asked for, like a loopback port) and a missing socket get
// none.
func TestForClientOverASocket(t *testing.T) {
	home := t.TempDir()
	if _, _, err := Ensure(filepath.Join(home, FileName)); err != nil {
		t.Fatal(err)
	}
	homeTok, _ := Read(filepath.Join(home, FileName))
	t.Setenv(EnvVar, "")
	os.Unsetenv(EnvVar)

	sock := filepath.Join(t.TempDir(), "metis.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !OwnSocket(sock) {
		t.Fatalf("OwnSocket(%s) is false for a socket this test made", sock)
	}
	if got, err := ForClient("unix://"+sock, "", home); err != nil || got != "" {
		t.Fatalf("own socket that the home's server does not serve: %q, %v; want none", got, err)
	}
	if err := WriteAddresses(home, []Address{{Scheme: "unix", Path: sock}}); err != nil {
		t.Fatal(err)
	}
	if got, err := ForClient("unix://"+sock, "", home); err != nil || got != homeTok {
		t.Fatalf("own socket: %q, %v; want the home token", got, err)
	}
	// Another name of the same socket (a symbolic link to its directory).
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(filepath.Dir(sock), alias); err != nil {
		t.Fatal(err)
	}
	if got, err := ForClient("unix://"+filepath.Join(alias, "metis.sock"), "", home); err != nil || got != homeTok {
		t.Fatalf("own socket by another name: %q, %v; want the home token", got, err)
	}
	if got, err := ForClient("unix://"+filepath.Join(home, "nope.sock"), "", home); err != nil || got != "" {
		t.Fatalf("missing socket: %q, %v; want none", got, err)
	}
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if OwnSocket(file) {
		t.Fatal("OwnSocket is true for a regular file")
	}
	if got, err := ForClient("unix://"+file, "", home); err != nil || got != "" {
		t.Fatalf("a regular file as the socket: %q, %v; want none", got, err)
	}

	// Another user's socket: only root can make one here.
	if os.Geteuid() != 0 {
		t.Skip("making another user's socket needs root")
	}
	if err := os.Lchown(sock, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if OwnSocket(sock) {
		t.Fatal("OwnSocket is true for uid 4242's socket")
	}
	if got, err := ForClient("unix://"+sock, "", home); err != nil || got != "" {
		t.Fatalf("another user's socket: %q, %v; want none", got, err)
	}
	t.Setenv(EnvVar, "envtoken-0123456789")
	if got, err := ForClient("unix://"+sock, "", home); err != nil || got != "envtoken-0123456789" {
		t.Fatalf("another user's socket with $%s: %q, %v", EnvVar, got, err)
	}
}
