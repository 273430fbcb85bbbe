package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"pgregory.net/rapid"
)

// fataler is what tree needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// tree makes files (and directories, for names ending in "/") under dir
// and returns dir, symlinks resolved.
func tree(t fataler, dir string, names ...string) string {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if strings.HasSuffix(n, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func grantsByPath(gs []grant) map[string]uint64 {
	m := map[string]uint64{}
	for _, g := range gs {
		m[g.path] |= g.access
	}
	return m
}

// TestExpandHidesAPathAndGrantsItsSiblings: Landlock only grants, so
// hiding home/.metis under a readable root grants every sibling along
// the path instead, and leaves the directories on the way with the
// right to list them only.
func TestExpandHidesAPathAndGrantsItsSiblings(t *testing.T) {
	root := tree(t, t.TempDir(), "home/.metis/token", "home/.metis/metis.db", "home/src/a.go", "home/.bashrc", "etc/passwd", "top.txt")
	hidden := []string{filepath.Join(root, "home/.metis")}
	if err := os.Symlink(filepath.Join(root, "home/.metis"), filepath.Join(root, "home/link")); err != nil {
		t.Fatal(err)
	}
	got := grantsByPath(expand(root, accessRead, hidden))
	want := map[string]uint64{
		root:                                ll.AccessFSReadDir,
		filepath.Join(root, "home"):         ll.AccessFSReadDir,
		filepath.Join(root, "home/src"):     accessRead,
		filepath.Join(root, "home/.bashrc"): accessRead & accessFile,
		filepath.Join(root, "etc"):          accessRead,
		filepath.Join(root, "top.txt"):      accessRead & accessFile,
	}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("%s: access %#x, want %#x", p, got[p], a)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected grant on %s (%#x)", p, got[p])
		}
	}
}

// TestExpandWritableHoldingAHiddenPath: a writable tree holding a hidden
// path (a workspace that is the home directory) keeps the hidden path
// out of every grant; its own directory keeps listing only.
func TestExpandWritableHoldingAHiddenPath(t *testing.T) {
	root := tree(t, t.TempDir(), "ws/.metis/token", "ws/code/main.go", "ws/README")
	ws := filepath.Join(root, "ws")
	got := grantsByPath(expand(ws, accessWrite, []string{filepath.Join(ws, ".metis")}))
	if got[ws] != ll.AccessFSReadDir {
		t.Errorf("the workspace itself: %#x, want listing only", got[ws])
	}
	if got[filepath.Join(ws, "code")] != accessWrite {
		t.Errorf("ws/code: %#x, want %#x", got[filepath.Join(ws, "code")], uint64(accessWrite))
	}
	if got[filepath.Join(ws, "README")] != accessWrite&accessFile {
		t.Errorf("ws/README: %#x", got[filepath.Join(ws, "README")])
	}
	if _, ok := got[filepath.Join(ws, ".metis")]; ok {
		t.Error("the hidden path got a grant")
	}
}

// TestPlanResolvesSymlinkedHiddenPaths: a hidden path that is a symlink
// hides its target, the hierarchy Landlock sees.
func TestPlanResolvesSymlinkedHiddenPaths(t *testing.T) {
	root := tree(t, t.TempDir(), "real/secret/key", "ws/")
	link := filepath.Join(root, "alias")
	if err := os.Symlink(filepath.Join(root, "real/secret"), link); err != nil {
		t.Fatal(err)
	}
	gs := plan(Policy{Confine: true, Hidden: []string{link}, Writable: []string{filepath.Join(root, "ws")}})
	for _, g := range gs {
		if g.path == filepath.Join(root, "real/secret") || under(g.path, filepath.Join(root, "real/secret")) {
			t.Fatalf("the symlinked hidden path's target got a grant: %s", g.path)
		}
	}
	byPath := grantsByPath(gs)
	if byPath[filepath.Join(root, "ws")] != accessWrite {
		t.Errorf("workspace: %#x", byPath[filepath.Join(root, "ws")])
	}
	if byPath["/dev/null"] != accessDevice {
		t.Errorf("/dev/null: %#x", byPath["/dev/null"])
	}
	for p := range byPath {
		if p == "/dev" || (under(p, "/dev") && !slices.ContainsFunc(devices, func(d struct {
			path   string
			access uint64
		}) bool {
			return d.path == p
		})) {
			t.Errorf("a device beyond the safe list got a grant: %s", p)
		}
	}
}

// TestExpandProperty: whatever the tree and the hidden paths, no grant
// reaches into a hidden path, a directory above one is granted listing
// at most, and every file outside them stays reachable by some grant.
func TestExpandProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{
			"a", "b", "c", "a/x", "a/y", "b/x", "a/x/k", "a/x/l", "b/x/k", "c/z", "a/y/m",
		}), 1, 11, rapid.ID[string]).Draw(rt, "files")
		dir, err := os.MkdirTemp("", "expand-prop-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		var files []string
		for _, n := range names {
			files = append(files, n+"/f")
		}
		root := tree(rt, dir, files...)
		hiddenRel := rapid.SliceOfNDistinct(rapid.SampledFrom(names), 0, 3, rapid.ID[string]).Draw(rt, "hidden")
		var hidden []string
		for _, h := range hiddenRel {
			hidden = append(hidden, filepath.Join(root, h))
		}
		gs := expand(root, accessRead, hidden)
		for _, g := range gs {
			for _, h := range hidden {
				if g.path == h || under(g.path, h) {
					rt.Fatalf("grant %s reaches hidden %s", g.path, h)
				}
				if under(h, g.path) && g.access&^ll.AccessFSReadDir != 0 {
					rt.Fatalf("grant %s above hidden %s has %#x", g.path, h, g.access)
				}
			}
		}
		for _, f := range files {
			p := filepath.Join(root, f)
			if slices.ContainsFunc(hidden, func(h string) bool { return under(p, h) }) {
				continue
			}
			if !slices.ContainsFunc(gs, func(g grant) bool {
				return (g.path == p || under(p, g.path)) && g.access&ll.AccessFSReadFile != 0
			}) {
				rt.Fatalf("%s is not readable under any grant", p)
			}
		}
	})
}

func TestUnder(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/a", "/", true}, {"/", "/", false}, {"/a/b", "/a", true}, {"/a", "/a", false}, {"/ab", "/a", false}, {"/a", "/a/b", false},
	} {
		if got := under(c.p, c.dir); got != c.want {
			t.Errorf("under(%q, %q) = %v", c.p, c.dir, got)
		}
	}
}
