package tool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// TestTooLongNamesAreInvalidInput: a name longer than the filesystem
// allows, or a path longer than PATH_MAX, is the model's mistake
// (invalid_input), not an execution error.
func TestTooLongNamesAreInvalidInput(t *testing.T) {
	_, ws, _ := confineFixture(t)
	env := newEnv(t, ws)
	long := strings.Repeat("n", 256)
	deep := strings.Repeat("abcdefgh/", 500) + "x"
	for _, p := range []string{long, "data/" + long, long + "/x", deep} {
		for _, tl := range fileTools() {
			_, err := run(t, tl, env, map[string]string{"path": p, "content": "x"})
			wantClass(t, err, tool.ClassInvalidInput)
		}
	}
	// 255 bytes is a legal name.
	ok := strings.Repeat("n", 255)
	if _, err := run(t, tool.WriteFile{}, env, map[string]string{"path": ok, "content": "x"}); err != nil {
		t.Fatalf("255-byte name: %v", err)
	}
}

// TestAbsoluteSymlinkInsideWorkspace: a symlink whose absolute target
// lies inside the workspace works like a relative one, for every file
// tool; one whose absolute target lies outside is still refused.
func TestAbsoluteSymlinkInsideWorkspace(t *testing.T) {
	base, ws, outside := confineFixture(t)
	mustSymlink(t, filepath.Join(ws, "data"), filepath.Join(ws, "absdir"))
	mustSymlink(t, filepath.Join(ws, "data", "hello.txt"), filepath.Join(ws, "absfile"))
	mustSymlink(t, filepath.Join(ws, "data", "absfresh.txt"), filepath.Join(ws, "absnew"))
	mustSymlink(t, ws, filepath.Join(ws, "data", "absroot"))
	mustSymlink(t, filepath.Join(ws, "absdir"), filepath.Join(ws, "abschain"))
	env := newEnv(t, ws)
	outsideBefore := snapshot(t, outside)

	res, err := run(t, tool.ListDir{}, env, map[string]string{"path": "absdir"})
	if err != nil || !containsLine(res.Content, "hello.txt") {
		t.Fatalf("list absdir: %q %v", res.Content, err)
	}
	for _, p := range []string{"absfile", "absdir/hello.txt", "data/absroot/data/hello.txt", "abschain/hello.txt", "absdir/sub/../hello.txt"} {
		res, err := run(t, tool.ReadFile{}, env, map[string]string{"path": p})
		if err != nil || res.Content != "hello" {
			t.Fatalf("read %s: %q %v", p, res.Content, err)
		}
	}
	if _, err := run(t, tool.WriteFile{}, env, map[string]string{"path": "absnew", "content": "fresh"}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "data", "absfresh.txt")); err != nil || string(b) != "fresh" {
		t.Fatalf("write through absnew: %q %v", b, err)
	}
	if _, err := run(t, tool.WriteFile{}, env, map[string]string{"path": "absdir/sub/made.txt", "content": "made"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "absfile")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("absfile is no longer a symlink (%v)", err)
	}
	// Absolute symlinks leading out stay refused, also after one that
	// stays inside.
	mustSymlink(t, filepath.Join(ws, "link"), filepath.Join(ws, "data", "toabslink"))
	for _, p := range []string{"link/secret.txt", "absdir/toabslink/secret.txt", "data/absroot/link/secret.txt", "data/absroot/rel/secret.txt"} {
		for _, tl := range fileTools() {
			_, err := run(t, tl, env, map[string]string{"path": p, "content": "PWNED"})
			wantClass(t, err, tool.ClassPermissionDenied)
		}
	}
	diffSnapshots(t, "outside", outsideBefore, snapshot(t, outside))
	_ = base
}

// TestHardLinkWriteRefused: write_file refuses a file with more than one
// name (a hard link to a file outside the workspace would otherwise let
// it write there), before changing anything in it; reading it and
// writing ordinary files still work.
func TestHardLinkWriteRefused(t *testing.T) {
	base, ws, outside := confineFixture(t)
	if err := os.Link(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "hard")); err != nil {
		t.Skipf("link: %v", err)
	}
	if err := os.Link(filepath.Join(ws, "data", "hello.txt"), filepath.Join(ws, "data", "hello2.txt")); err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, ws)
	before := snapshot(t, base)
	for _, p := range []string{"hard", "data/hello2.txt", "data/hello.txt", "infile"} {
		_, err := run(t, tool.WriteFile{}, env, map[string]string{"path": p, "content": "PWNED"})
		wantClass(t, err, tool.ClassPermissionDenied)
		if !strings.Contains(err.Error(), "hard links") {
			t.Errorf("%s: error %v does not say why", p, err)
		}
	}
	diffSnapshots(t, "after writes through hard links", before, snapshot(t, base))
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != secret {
		t.Fatalf("outside file changed: %q", b)
	}
	if _, err := run(t, tool.WriteFile{}, env, map[string]string{"path": "data/sub/x.txt", "content": "ok"}); err != nil {
		t.Fatalf("ordinary write: %v", err)
	}
}
