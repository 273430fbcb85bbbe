package tool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// FuzzFileToolsConfined: whatever path the model sends, every file tool
// either fails with a known class or works inside the workspace; nothing
// outside changes and no outside content is returned.
func FuzzFileToolsConfined(f *testing.F) {
	for _, s := range []string{".", "data/hello.txt", "../outside/secret.txt", "link/secret.txt", "absdir/hello.txt",
		"absout/secret.txt", "data/absroot/link/x", "hard", strings.Repeat("n", 256), "data/" + strings.Repeat("a/", 2100),
		"infile", "newlink", "chain1/x", "a\x00b", "/etc/passwd", "data/up/outside/secret.txt"} {
		f.Add(s)
	}
	base := f.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(ws, "data"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644))
	must(os.WriteFile(filepath.Join(ws, "data", "hello.txt"), []byte("hello"), 0o644))
	for link, target := range map[string]string{
		"link": outside, "rel": "../outside", "infile": "data/hello.txt", "newlink": "data/fresh.txt",
		"absdir": filepath.Join(ws, "data"), "absout": outside, "data/absroot": ws, "data/up": "../..",
		"chain1": "chain2", "chain2": "rel",
	} {
		must(os.Symlink(target, filepath.Join(ws, link)))
	}
	// A hard link may be read (its content is not the secret) but never
	// written: the snapshot of outside covers it.
	must(os.WriteFile(filepath.Join(outside, "shared.txt"), []byte("shared"), 0o644))
	_ = os.Link(filepath.Join(outside, "shared.txt"), filepath.Join(ws, "hard"))
	root, err := os.OpenRoot(ws)
	must(err)
	f.Cleanup(func() { root.Close() })
	env := tool.Env{Root: root, Workspace: ws}
	classes := map[string]bool{tool.ClassInvalidInput: true, tool.ClassPermissionDenied: true, tool.ClassNotFound: true}

	f.Fuzz(func(t *testing.T, p string) {
		before := snapshot(t, outside)
		for _, tl := range fileTools() {
			res, err := run(t, tl, env, map[string]string{"path": p, "content": "fuzz"})
			if err != nil && !classes[tool.ClassOf(err)] {
				t.Fatalf("%s %q: class %s: %v", tl.Spec().Name, p, tool.ClassOf(err), err)
			}
			if strings.Contains(res.Content, secret) || (err != nil && strings.Contains(err.Error(), secret)) {
				t.Fatalf("%s %q: outside content returned", tl.Spec().Name, p)
			}
		}
		diffSnapshots(t, "outside after "+p, before, snapshot(t, outside))
	})
}
