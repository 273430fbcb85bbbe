package tool_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

const secret = "TOP SECRET"

// confineFixture builds base/{ws,outside} and returns base, ws, outside.
//
//	base/outside/secret.txt            "TOP SECRET"
//	base/outside/sub/deep.txt
//	base/ws/data/hello.txt             "hello"
//	base/ws/data/sub/x.txt             "x"
//	base/ws/link        -> <abs>/outside           (absolute, dir)
//	base/ws/rel         -> ../outside              (relative, dir)
//	base/ws/filelink    -> <abs>/outside/secret.txt
//	base/ws/relfile     -> ../outside/secret.txt
//	base/ws/dangling    -> <abs>/outside/created.txt   (missing)
//	base/ws/reldangling -> ../outside/created2.txt     (missing)
//	base/ws/chain1 -> chain2 -> data/chain3 -> ../../outside
//	base/ws/data/up     -> ../..                   (climbs out)
//	base/ws/inlink      -> data                    (stays inside)
//	base/ws/infile      -> data/hello.txt          (stays inside)
//	base/ws/newlink     -> data/fresh.txt          (dangling, inside)
//	base/ws/inchain1 -> inchain2 -> data/sub/..    (chain, inside)
func confineFixture(t *testing.T) (base, ws, outside string) {
	t.Helper()
	base = t.TempDir()
	ws = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	mustWrite(t, filepath.Join(outside, "secret.txt"), secret)
	mustWrite(t, filepath.Join(outside, "sub", "deep.txt"), "deep")
	mustWrite(t, filepath.Join(ws, "data", "hello.txt"), "hello")
	mustWrite(t, filepath.Join(ws, "data", "sub", "x.txt"), "x")

	mustSymlink(t, outside, filepath.Join(ws, "link"))
	mustSymlink(t, "../outside", filepath.Join(ws, "rel"))
	mustSymlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(ws, "filelink"))
	mustSymlink(t, "../outside/secret.txt", filepath.Join(ws, "relfile"))
	mustSymlink(t, filepath.Join(outside, "created.txt"), filepath.Join(ws, "dangling"))
	mustSymlink(t, "../outside/created2.txt", filepath.Join(ws, "reldangling"))
	mustSymlink(t, "chain2", filepath.Join(ws, "chain1"))
	mustSymlink(t, "data/chain3", filepath.Join(ws, "chain2"))
	mustSymlink(t, "../../outside", filepath.Join(ws, "data", "chain3"))
	mustSymlink(t, "../..", filepath.Join(ws, "data", "up"))

	mustSymlink(t, "data", filepath.Join(ws, "inlink"))
	mustSymlink(t, "data/hello.txt", filepath.Join(ws, "infile"))
	mustSymlink(t, "data/fresh.txt", filepath.Join(ws, "newlink"))
	mustSymlink(t, "inchain2", filepath.Join(ws, "inchain1"))
	mustSymlink(t, "data/sub/..", filepath.Join(ws, "inchain2"))
	return base, ws, outside
}

func fileTools() []tool.Tool { return []tool.Tool{tool.ListDir{}, tool.ReadFile{}, tool.WriteFile{}} }

// TestConfinement runs every file tool on every escaping path and checks
// that it fails with permission_denied and that nothing anywhere under
// the test's base directory (workspace and its sibling "outside") is
// created, removed or modified.
func TestConfinement(t *testing.T) {
	base, ws, outside := confineFixture(t)
	env := newEnv(t, ws)

	// The /etc/passwd write case writes /etc/passwd's own bytes, so that
	// even a broken confinement running as root could not damage it.
	passwd, passwdErr := os.ReadFile("/etc/passwd")

	cases := []struct {
		name string
		path string
	}{
		{"dotdot", "../x"},
		{"bare dotdot", ".."},
		{"dotdot to outside file", "../outside/secret.txt"},
		{"dot dotdot", "./../outside/secret.txt"},
		{"nested dotdot", "a/../../x"},
		{"deep dotdot", "data/sub/../../../outside/secret.txt"},
		{"dotdot trailing slash", "../outside/"},
		{"etc passwd", "/etc/passwd"},
		{"absolute outside dir", outside},
		{"absolute outside dir slash", outside + "/"},
		{"absolute outside file", filepath.Join(outside, "secret.txt")},
		{"absolute outside new file", filepath.Join(outside, "new.txt")},
		{"absolute workspace path", filepath.Join(ws, "data", "hello.txt")},
		{"backslash absolute", `\etc\passwd`},
		{"link to outside dir", "link"},
		{"through link, new name", "link/x"},
		{"through link, existing file", "link/secret.txt"},
		{"through link, nested", "link/sub/deep.txt"},
		{"link trailing slash", "link/"},
		{"link dot", "link/."},
		{"relative link to outside dir", "rel"},
		{"through relative link", "rel/secret.txt"},
		{"relative link trailing slash", "rel/"},
		{"link to outside file", "filelink"},
		{"relative link to outside file", "relfile"},
		{"dangling link to outside", "dangling"},
		{"relative dangling link to outside", "reldangling"},
		{"dangling link trailing slash", "dangling/"},
		{"embedded NUL", "a\x00b"},
		{"NUL after escape", "../outside/secret.txt\x00"},
		{"NUL inside existing name", "data/hello.txt\x00"},
		{"symlink chain ending outside", "chain1"},
		{"through symlink chain", "chain1/secret.txt"},
		{"through symlink chain, new name", "chain1/new.txt"},
		{"climbing link", "data/up"},
		{"through climbing link", "data/up/outside/secret.txt"},
		{"through climbing link, new name", "data/up/outside/made.txt"},
	}

	for _, tl := range fileTools() {
		name := tl.Spec().Name
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				before := snapshot(t, base)
				var (
					res tool.Result
					err error
				)
				if name == "write_file" {
					content := "PWNED"
					if c.path == "/etc/passwd" {
						if passwdErr != nil {
							t.Skipf("cannot read /etc/passwd to use as harmless content: %v", passwdErr)
						}
						content = string(passwd)
					}
					res, err = run(t, tl, env, map[string]string{"path": c.path, "content": content})
				} else {
					res, err = run(t, tl, env, map[string]string{"path": c.path})
				}
				wantClass(t, err, tool.ClassPermissionDenied)
				if !reflect.DeepEqual(res, tool.Result{}) {
					t.Errorf("failed call returned a result: %+v", res)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error leaks outside content: %v", err)
				}
				diffSnapshots(t, "after "+name+" "+c.name, before, snapshot(t, base))
				if passwdErr == nil {
					if now, err := os.ReadFile("/etc/passwd"); err != nil || string(now) != string(passwd) {
						t.Fatalf("/etc/passwd changed or vanished (err %v)", err)
					}
				}
			})
		}
	}

	// Nothing at all was created outside the workspace, by any case.
	for _, p := range []string{"x", "new.txt", "outside/x", "outside/new.txt", "outside/created.txt", "outside/created2.txt", "outside/made.txt"} {
		if _, err := os.Lstat(filepath.Join(base, p)); err == nil {
			t.Errorf("%s exists outside the workspace", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != secret {
		t.Errorf("outside secret changed: %q, %v", b, err)
	}
}

// TestConfinementAllowed checks that confinement does not get in the way
// of paths that stay inside the workspace, including through symlinks.
func TestConfinementAllowed(t *testing.T) {
	base, ws, outside := confineFixture(t)
	env := newEnv(t, ws)
	outsideBefore := snapshot(t, outside)
	defer func() { diffSnapshots(t, "outside", outsideBefore, snapshot(t, outside)) }()
	_ = base

	list := func(t *testing.T, p string) string {
		t.Helper()
		res, err := run(t, tool.ListDir{}, env, map[string]string{"path": p})
		if err != nil {
			t.Fatalf("list_dir %q: %v", p, err)
		}
		return res.Content
	}
	read := func(t *testing.T, p string) string {
		t.Helper()
		res, err := run(t, tool.ReadFile{}, env, map[string]string{"path": p})
		if err != nil {
			t.Fatalf("read_file %q: %v", p, err)
		}
		return res.Content
	}
	write := func(t *testing.T, p, content string) {
		t.Helper()
		if _, err := run(t, tool.WriteFile{}, env, map[string]string{"path": p, "content": content}); err != nil {
			t.Fatalf("write_file %q: %v", p, err)
		}
	}
	onDisk := func(t *testing.T, rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(ws, rel))
		if err != nil {
			t.Fatalf("read %s on disk: %v", rel, err)
		}
		return string(b)
	}

	t.Run("dot lists root", func(t *testing.T) {
		got := list(t, ".")
		for _, want := range []string{"data/", "link", "inlink", "infile", "chain1"} {
			if !containsLine(got, want) {
				t.Errorf("root listing lacks %q:\n%s", want, got)
			}
		}
		if list(t, "") != got || list(t, "./") != got || list(t, "data/..") != got {
			t.Errorf(`"", "./" and "data/.." should list the same as "."`)
		}
	})
	t.Run("nested paths", func(t *testing.T) {
		if got := list(t, "data/sub"); got != "x.txt" {
			t.Errorf("list data/sub = %q", got)
		}
		if got := list(t, "data/sub/"); got != "x.txt" {
			t.Errorf("list data/sub/ = %q", got)
		}
		if got := read(t, "data/sub/x.txt"); got != "x" {
			t.Errorf("read = %q", got)
		}
		if got := read(t, "./data/sub/../hello.txt"); got != "hello" {
			t.Errorf("read with dot segments = %q", got)
		}
		if got := read(t, "data//hello.txt"); got != "hello" {
			t.Errorf("read with double slash = %q", got)
		}
		write(t, "data/sub/new.txt", "nested")
		if got := onDisk(t, "data/sub/new.txt"); got != "nested" {
			t.Errorf("on disk = %q", got)
		}
		// A name that merely starts with dots is not an escape.
		write(t, "..hidden", "dots")
		if got := read(t, "..hidden"); got != "dots" {
			t.Errorf("read ..hidden = %q", got)
		}
	})
	t.Run("symlink to inside dir", func(t *testing.T) {
		if got := list(t, "inlink"); !containsLine(got, "hello.txt") || !containsLine(got, "sub/") {
			t.Errorf("list inlink = %q", got)
		}
		if got := list(t, "inlink/"); !containsLine(got, "hello.txt") {
			t.Errorf("list inlink/ = %q", got)
		}
		if got := read(t, "inlink/hello.txt"); got != "hello" {
			t.Errorf("read inlink/hello.txt = %q", got)
		}
		write(t, "inlink/via-link.txt", "via link")
		if got := onDisk(t, "data/via-link.txt"); got != "via link" {
			t.Errorf("on disk = %q", got)
		}
	})
	t.Run("symlink to inside file", func(t *testing.T) {
		if got := read(t, "infile"); got != "hello" {
			t.Errorf("read infile = %q", got)
		}
		write(t, "infile", "rewritten")
		if got := onDisk(t, "data/hello.txt"); got != "rewritten" {
			t.Errorf("target on disk = %q", got)
		}
		if fi, err := os.Lstat(filepath.Join(ws, "infile")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("infile is no longer a symlink (%v)", err)
		}
	})
	t.Run("dangling symlink inside", func(t *testing.T) {
		write(t, "newlink", "fresh")
		if got := onDisk(t, "data/fresh.txt"); got != "fresh" {
			t.Errorf("on disk = %q", got)
		}
	})
	t.Run("symlink chain inside", func(t *testing.T) {
		if got := list(t, "inchain1"); !containsLine(got, "sub/") {
			t.Errorf("list inchain1 = %q", got)
		}
		if got := read(t, "inchain1/sub/x.txt"); got != "x" {
			t.Errorf("read via chain = %q", got)
		}
		write(t, "inchain1/chained.txt", "chained")
		if got := onDisk(t, "data/chained.txt"); got != "chained" {
			t.Errorf("on disk = %q", got)
		}
	})
}

func containsLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if l == line {
			return true
		}
	}
	return false
}
