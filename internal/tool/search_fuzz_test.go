package tool_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// FuzzSearchArguments: whatever arguments the model gives glob and
// grep, they answer or fail with invalid_input, permission_denied or
// not_found, and never return what lies outside the workspace.
func FuzzSearchArguments(f *testing.F) {
	for _, s := range [][4]string{
		{"**/*.txt", "", "", "hello"}, {"*", "data", "*.txt", "h.l+o"}, {"../*", "..", "../*", "(?i)SECRET"},
		{"link/**", "link", "{a,b", "["}, {"/etc/*", "/etc", "**", `\bTOP\b`}, {"[a-", "data/up", "a/../../x", "x{2,}"},
	} {
		f.Add(s[0], s[1], s[2], s[3], 2, false)
	}
	base := f.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for p, c := range map[string]string{"outside/secret.txt": "TOP SECRET\n", "ws/data/hello.txt": "hello\n", "ws/data/x.txt": "x\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(base, p)), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, p), []byte(c), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	for link, target := range map[string]string{"link": outside, "rel": "../outside", "file": filepath.Join(outside, "secret.txt"),
		"relfile": "../outside/secret.txt", "data/up": "../.."} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			f.Fatal(err)
		}
	}
	r, err := os.OpenRoot(ws)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.Close() })
	root := tool.Env{Root: r, Workspace: ws}
	classes := map[string]bool{tool.ClassInvalidInput: true, tool.ClassPermissionDenied: true, tool.ClassNotFound: true}
	f.Fuzz(func(t *testing.T, glob, path, filter, pattern string, context int, fold bool) {
		for tl, in := range map[tool.Tool]map[string]any{
			tool.Glob{}: {"pattern": glob, "path": path},
			tool.Grep{}: {"pattern": pattern, "path": path, "glob": filter, "context": context, "ignore_case": fold},
		} {
			b, _ := json.Marshal(in)
			res, err := tl.Run(contextBackground(), root, b)
			if err != nil && !classes[tool.ClassOf(err)] {
				t.Fatalf("%s %s: class %s: %v", tl.Spec().Name, b, tool.ClassOf(err), err)
			}
			if strings.Contains(res.Content, "TOP SECRET") || strings.Contains(res.Content, "outside/") {
				t.Fatalf("%s %s: outside content:\n%s", tl.Spec().Name, b, res.Content)
			}
		}
	})
}

func contextBackground() context.Context { return context.Background() }
