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

// FuzzApplyPatch: whatever patch the model sends, apply_patch either
// applies it inside the workspace or fails with a classified error
// (never a panic or an execution error); Targets agrees with Run on
// whether the patch parses; nothing outside the workspace changes.
func FuzzApplyPatch(f *testing.F) {
	for _, s := range []string{
		"*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch",
		"*** Begin Patch\n*** Add File: n/new.txt\n+x\n*** Delete File: b.txt\n*** End Patch",
		"*** Begin Patch\n*** Update File: a.txt\n*** Move to: c.txt\n@@ one\n two\n-three\n+3\n*** End of File\n*** End Patch",
		"<<'EOF'\n*** Begin Patch\n*** Update File: a.txt\n one\n+1.5\n*** End Patch\nEOF",
		"*** Begin Patch\n*** Update File: ../outside/secret.txt\n@@\n-TOP SECRET\n+x\n*** End Patch",
		"*** Begin Patch\n*** Update File: a.txt\n@@\n\n\n*** End Patch",
		"*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n@@\n*** End of File\n*** End Patch",
		"*** Begin Patch\n*** End Patch", "", "*** Begin Patch", "@@\n-x",
	} {
		f.Add(s)
	}
	base := f.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP SECRET\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	classes := map[string]bool{tool.ClassInvalidInput: true, tool.ClassPermissionDenied: true, tool.ClassNotFound: true}
	f.Fuzz(func(t *testing.T, p string) {
		ws := t.TempDir()
		mustWrite(t, filepath.Join(ws, "a.txt"), "one\ntwo\nthree\n")
		mustWrite(t, filepath.Join(ws, "b.txt"), "bee\r\n")
		mustSymlink(t, outside, filepath.Join(ws, "link"))
		env := newEnv(t, ws)
		in, _ := json.Marshal(map[string]string{"patch": p})
		before := snapshot(t, outside)
		_, terr := tool.ApplyPatch{}.Targets(in)
		_, err := tool.ApplyPatch{}.Run(context.Background(), env, in)
		if err != nil && !classes[tool.ClassOf(err)] {
			t.Fatalf("patch %q: class %s: %v", p, tool.ClassOf(err), err)
		}
		if terr != nil && err == nil {
			t.Fatalf("patch %q: Targets refused it (%v) but Run applied it", p, terr)
		}
		diffSnapshots(t, "outside", before, snapshot(t, outside))
		ents, _ := os.ReadDir(ws)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".metis-") {
				t.Fatalf("temporary file left: %s", e.Name())
			}
		}
	})
}
