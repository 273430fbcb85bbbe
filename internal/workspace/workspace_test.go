package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/workspace"
)

// TestRefusesRootAndSystemDirectories: the filesystem root, system
// directories, and anything inside /proc, /sys and /dev are refused as
// ErrForbidden, however the path is spelled; a project below a system
// directory is fine.
func TestRefusesRootAndSystemDirectories(t *testing.T) {
	p := workspace.Policy{Home: t.TempDir()}
	for _, dir := range []string{"/", "//", "/etc", "/etc/", "/usr", "/usr/lib", "/bin", "/sbin", "/var", "/var/lib", "/run",
		"/boot", "/tmp", "/home", "/root", "/proc", "/proc/self", "/proc/1", "/sys", "/sys/kernel", "/dev", "/dev/shm",
		"/tmp/../etc", "/usr/../"} {
		if _, err := os.Stat(dir); err != nil {
			continue // not on this system
		}
		_, err := p.Check(dir, true)
		var e *workspace.Error
		if !errors.Is(err, workspace.ErrForbidden) || !errors.As(err, &e) || e.Reason == "" {
			t.Errorf("Check(%q): %v, want ErrForbidden with a reason", dir, err)
		}
	}
	for _, dir := range []string{"/lib", "/lib64", "/lib32"} {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			if _, err := p.Check(dir, true); !errors.Is(err, workspace.ErrForbidden) {
				t.Errorf("Check(%q): %v, want ErrForbidden", dir, err)
			}
		}
	}
	project := t.TempDir() // below /tmp: a project
	if got, err := p.Check(project, false); err != nil || got != mustResolve(t, project) {
		t.Errorf("Check(%q) = %q, %v; want it accepted", project, got, err)
	}
}

// TestResolvesSymlinksBeforeDeciding: a symbolic link to the root or to
// a system directory is refused; a link to a project is accepted as the
// project's real path, the directory the tools are then confined to.
func TestResolvesSymlinksBeforeDeciding(t *testing.T) {
	dir := t.TempDir()
	p := workspace.Policy{Home: filepath.Join(dir, "home")}
	link := func(name, target string) string {
		l := filepath.Join(dir, name)
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	for name, target := range map[string]string{"to-root": "/", "to-etc": "/etc", "to-proc": "/proc/self"} {
		if _, err := p.Check(link(name, target), false); !errors.Is(err, workspace.ErrForbidden) {
			t.Errorf("a link to %s: %v, want ErrForbidden", target, err)
		}
	}
	// A link to a link to the root, and a path through a link.
	if _, err := p.Check(link("twice", filepath.Join(dir, "to-root")), false); !errors.Is(err, workspace.ErrForbidden) {
		t.Errorf("a link to a link to /: %v", err)
	}
	if _, err := p.Check(filepath.Join(dir, "to-root", "etc"), false); !errors.Is(err, workspace.ErrForbidden) {
		t.Errorf("/etc through a link: %v", err)
	}
	project := filepath.Join(dir, "project")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := p.Check(link("to-project", project), false)
	if err != nil || got != mustResolve(t, project) {
		t.Errorf("a link to a project: %q, %v; want %q", got, err, project)
	}
}

// TestHomeNeedsConfirmation: the user's home directory, reached
// directly, through a link, or as a directory above it (that is not a
// system directory), is ErrHome unless allowed; inside it is fine.
func TestHomeNeedsConfirmation(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "users", "me")
	project := filepath.Join(home, "src", "app")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	p := workspace.Policy{Home: home}
	homeLink := filepath.Join(dir, "h")
	if err := os.Symlink(home, homeLink); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{home, home + "/", homeLink, filepath.Join(dir, "users"), filepath.Join(project, "..", "..")} {
		_, err := p.Check(ws, false)
		var e *workspace.Error
		if !errors.Is(err, workspace.ErrHome) || !errors.As(err, &e) || !strings.Contains(e.Reason, "allow_home") {
			t.Errorf("Check(%q): %v, want ErrHome naming allow_home", ws, err)
		}
		if got, err := p.Check(ws, true); err != nil || got == "" {
			t.Errorf("Check(%q, allowHome): %q, %v; want it accepted", ws, got, err)
		}
	}
	if _, err := p.Check(project, false); err != nil {
		t.Errorf("a project in the home: %v", err)
	}
	// The home is checked by its real path too (a home given through a link).
	viaLink := workspace.Policy{Home: homeLink}
	if _, err := viaLink.Check(home, false); !errors.Is(err, workspace.ErrHome) {
		t.Errorf("home given as a link: %v", err)
	}
	// /home holds other users' homes: refused even when confirmed.
	if st, err := os.Stat("/home"); err == nil && st.IsDir() {
		if _, err := (workspace.Policy{Home: "/home/someone"}).Check("/home", true); !errors.Is(err, workspace.ErrForbidden) {
			t.Errorf("/home with allow_home: %v, want ErrForbidden", err)
		}
	}
}

// TestInvalidPaths: relative, missing and non-directory paths are
// ErrInvalid.
func TestInvalidPaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p := workspace.Policy{}
	for _, ws := range []string{"", "rel/dir", ".", filepath.Join(dir, "missing"), file} {
		if _, err := p.Check(ws, true); !errors.Is(err, workspace.ErrInvalid) {
			t.Errorf("Check(%q): %v, want ErrInvalid", ws, err)
		}
	}
}

// FuzzCheck: whatever the path, Check does not panic, and what it
// accepts is an absolute, existing directory that is neither the root
// nor inside a pseudo-filesystem.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"/", "/etc", "/tmp/../etc", "/proc/self/cwd", "", "..", "/a\x00b", "/tmp", "//usr//lib/", "/dev/../home"} {
		f.Add(s, false)
	}
	p := workspace.Policy{Home: "/nonexistent-home"}
	f.Fuzz(func(t *testing.T, path string, allowHome bool) {
		got, err := p.Check(path, allowHome)
		if err != nil {
			var e *workspace.Error
			if !errors.As(err, &e) || e.Reason == "" {
				t.Fatalf("Check(%q): %v is not a workspace.Error with a reason", path, err)
			}
			return
		}
		st, serr := os.Stat(got)
		if !filepath.IsAbs(got) || serr != nil || !st.IsDir() || got == "/" ||
			strings.HasPrefix(got+"/", "/proc/") || strings.HasPrefix(got+"/", "/sys/") || strings.HasPrefix(got+"/", "/dev/") {
			t.Fatalf("Check(%q) accepted %q", path, got)
		}
	})
}

func mustResolve(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
