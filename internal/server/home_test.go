package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/metis-agent/metis/internal/config"
)

// chmod sets a mode past the umask, sticky bit included.
func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestHomeIsCheckedWithTheSocketOff: a home that group or others may
// write to is refused with --socket=off too (the socket's directory
// check used to be the only one), and the error spells its mode as
// chmod does, sticky bit included.
func TestHomeIsCheckedWithTheSocketOff(t *testing.T) {
	for _, c := range []struct {
		mode os.FileMode
		want string
	}{
		{0o777, "(mode 0777)"},
		{0o777 | os.ModeSticky, "(mode 1777)"},
		{0o770, "(mode 0770)"},
	} {
		home := filepath.Join(t.TempDir(), "home")
		if err := os.Mkdir(home, 0o700); err != nil {
			t.Fatal(err)
		}
		chmod(t, home, c.mode)
		_, err := newServer(t, func(cfg *config.Config) { cfg.Home, cfg.Socket = home, "" })
		if err == nil || !strings.Contains(err.Error(), "writable by group or others "+c.want) || !strings.Contains(err.Error(), home) {
			t.Fatalf("home mode %v with --socket=off: %v, want a refusal naming the home and %s", c.mode, err, c.want)
		}
		if _, err := os.Stat(filepath.Join(home, "metis.db")); err == nil {
			t.Fatalf("home mode %v: the database was created in a refused home", c.mode)
		}
	}
}

// TestHomeOfAnotherUserIsRefused: a home that belongs to another user
// is refused whatever --socket says (only root can make one here).
func TestHomeOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making another user's directory needs root")
	}
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, err := newServer(t, func(cfg *config.Config) { cfg.Home, cfg.Socket = home, "" })
	if err == nil || !strings.Contains(err.Error(), "belongs to uid 4242") {
		t.Fatalf("another user's home: %v", err)
	}
}

// TestHomeFilesArePrivate: under the usual umask (022) a new home is
// 0700 and every file the server creates in it is 0600 (the database
// and its WAL and shared-memory files used to be 0644); a home others
// may read is made 0700, and a database left readable by others is
// made 0600.
func TestHomeFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)

	home := filepath.Join(t.TempDir(), "new")
	s, err := newServer(t, func(cfg *config.Config) {
		cfg.Home, cfg.PublicName, cfg.Socket = home, "metis.example.com", filepath.Join(home, "metis.sock")
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, home, "metis.db", "metis.db-wal", "metis.db-shm", "metis.lock", "metis.sock", "token", "addresses.json")

	// An older home: 0755, with a 0644 database.
	home = filepath.Join(t.TempDir(), "old")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, home, 0o755)
	db := filepath.Join(home, "metis.db")
	if err := os.WriteFile(db, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	chmod(t, db, 0o644)
	if _, err := newServer(t, func(cfg *config.Config) { cfg.Home = home }); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, home, "metis.db")
}

// checkPrivate fails unless dir is 0700 and each of names in it is
// 0600.
func checkPrivate(t *testing.T, dir string, names ...string) {
	t.Helper()
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("home %s has mode %v, want 0700", dir, st.Mode().Perm())
	}
	for _, n := range names {
		st, err := os.Lstat(filepath.Join(dir, n))
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", n, st.Mode().Perm())
		}
	}
}

// TestSocketDirModeSpellsTheStickyBit: a socket directory of mode 1777
// (a /tmp of one's own) is refused as "(mode 1777)", not "(mode 0777)".
func TestSocketDirModeSpellsTheStickyBit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, 0o777|os.ModeSticky)
	_, err := newServer(t, func(cfg *config.Config) { cfg.Socket = filepath.Join(dir, "metis.sock") })
	if err == nil || !strings.Contains(err.Error(), "(mode 1777)") {
		t.Fatalf("socket in a 1777 directory: %v", err)
	}
}
