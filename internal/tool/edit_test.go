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

func edit(t *testing.T, env tool.Env, path, old, new string, all bool) (tool.Result, error) {
	t.Helper()
	return run(t, tool.EditFile{}, env, map[string]any{"path": path, "old_string": old, "new_string": new, "replace_all": all})
}

func readWS(t *testing.T, ws, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noTemps fails if a temporary file of an edit was left in dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".metis-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestEditFileReplacesUniqueString(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "src", "a.go"), "package a\n\nfunc A() int {\n\treturn 1\n}\n")
	res, err := edit(t, env, "src/a.go", "return 1", "return 2", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, ws, "src/a.go"); got != "package a\n\nfunc A() int {\n\treturn 2\n}\n" {
		t.Fatalf("file = %q", got)
	}
	if !strings.Contains(res.Content, "line 4") || !strings.Contains(res.Content, "\treturn 2") {
		t.Errorf("result does not say where, with the new lines: %q", res.Content)
	}
	if res.Change == nil || len(res.Change.Paths) != 1 || res.Change.Paths[0] != "src/a.go" {
		t.Fatalf("change = %+v", res.Change)
	}
	want := "--- a/src/a.go\n+++ b/src/a.go\n@@ -1,5 +1,5 @@\n package a\n \n func A() int {\n-\treturn 1\n+\treturn 2\n }\n"
	if res.Change.Diff != want {
		t.Errorf("diff =\n%s\nwant\n%s", res.Change.Diff, want)
	}
	noTemps(t, filepath.Join(ws, "src"))
}

func TestEditFileNotFoundShowsNearestLines(t *testing.T) {
	ws, env := workspace(t)
	body := "alpha\nbeta\nfunc compute(x int) int {\n\treturn x * 2\n}\nomega\n"
	mustWrite(t, filepath.Join(ws, "f.go"), body)
	_, err := edit(t, env, "f.go", "func compute(x int) int {\n\treturn x * 3\n}", "X", false)
	wantClass(t, err, tool.ClassInvalidInput)
	msg := err.Error()
	for _, want := range []string{"not found in f.go", "3-5", "func compute(x int) int {", "return x * 2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if readWS(t, ws, "f.go") != body {
		t.Error("file changed")
	}
}

func TestEditFileWhitespaceMismatchIsPointedOut(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "f.py"), "def f():\n    if x:\n        return 1\n")
	_, err := edit(t, env, "f.py", "if x:\n    return 1", "if y:\n    return 1", false)
	wantClass(t, err, tool.ClassInvalidInput)
	if !strings.Contains(err.Error(), "whitespace is ignored") || !strings.Contains(err.Error(), "2-3") {
		t.Errorf("message does not point at the lines that differ in whitespace: %v", err)
	}
}

func TestEditFileSeveralMatchesFailWithLineNumbers(t *testing.T) {
	ws, env := workspace(t)
	body := "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n"
	mustWrite(t, filepath.Join(ws, "f.txt"), body)
	_, err := edit(t, env, "f.txt", "x = 1", "x = 9", false)
	wantClass(t, err, tool.ClassInvalidInput)
	if !strings.Contains(err.Error(), "3 times") || !strings.Contains(err.Error(), "1, 3 and 5") || !strings.Contains(err.Error(), "replace_all") {
		t.Errorf("message: %v", err)
	}
	if readWS(t, ws, "f.txt") != body {
		t.Error("file changed")
	}
}

func TestEditFileReplaceAll(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "f.txt"), "x = 1\ny = 2\nx = 1\n")
	res, err := edit(t, env, "f.txt", "x = 1", "x = 9", true)
	if err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, ws, "f.txt"); got != "x = 9\ny = 2\nx = 9\n" {
		t.Fatalf("file = %q", got)
	}
	if !strings.Contains(res.Summary, "2 occurrences") || !strings.Contains(res.Summary, "1 and 3") {
		t.Errorf("summary = %q", res.Summary)
	}
}

// TestEditFileKeepsCRLF: a CRLF file stays CRLF when the model sends LF
// strings, including on the lines it adds.
func TestEditFileKeepsCRLF(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "w.txt"), "one\r\ntwo\r\nthree\r\n")
	if _, err := edit(t, env, "w.txt", "one\ntwo\n", "one\ntwo and a half\nmore\n", false); err != nil {
		t.Fatal(err)
	}
	got := readWS(t, ws, "w.txt")
	if got != "one\r\ntwo and a half\r\nmore\r\nthree\r\n" {
		t.Fatalf("file = %q", got)
	}
	// And an LF file stays LF when the model sends CRLF.
	mustWrite(t, filepath.Join(ws, "u.txt"), "one\ntwo\n")
	if _, err := edit(t, env, "u.txt", "one\r\ntwo", "1\r\n2", false); err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, ws, "u.txt"); got != "1\n2\n" {
		t.Fatalf("LF file = %q", got)
	}
}

func TestEditFileKeepsModeAndBOM(t *testing.T) {
	ws, env := workspace(t)
	p := filepath.Join(ws, "run.sh")
	mustWrite(t, p, "\uFEFF#!/bin/sh\necho hi\n")
	if err := os.Chmod(p, 0o751); err != nil {
		t.Fatal(err)
	}
	if _, err := edit(t, env, "run.sh", "echo hi", "echo bye", false); err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, ws, "run.sh"); got != "\uFEFF#!/bin/sh\necho bye\n" {
		t.Fatalf("file = %q", got)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o751 {
		t.Errorf("mode = %v, want 0751", st.Mode().Perm())
	}
}

// TestEditFileKeepsLatin1: a file that is not UTF-8 is edited as Latin-1
// and written back in it.
func TestEditFileKeepsLatin1(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "l.txt"), "caf\xe9 cr\xe8me\n")
	if _, err := edit(t, env, "l.txt", "café", "thé", false); err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, ws, "l.txt"); got != "th\xe9 cr\xe8me\n" {
		t.Fatalf("file = %q", got)
	}
	_, err := edit(t, env, "l.txt", "thé", "€", false)
	wantClass(t, err, tool.ClassInvalidInput)
	if !strings.Contains(err.Error(), "Latin-1") {
		t.Errorf("message: %v", err)
	}
}

func TestEditFileRefusesHardLinks(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	mustWrite(t, filepath.Join(base, "outside.txt"), "secret = 1\n")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(base, "outside.txt"), filepath.Join(ws, "hard.txt")); err != nil {
		t.Skipf("hard links: %v", err)
	}
	env := newEnv(t, ws)
	_, err := edit(t, env, "hard.txt", "secret = 1", "secret = 2", false)
	wantClass(t, err, tool.ClassPermissionDenied)
	if readWS(t, base, "outside.txt") != "secret = 1\n" {
		t.Fatal("the outside file changed")
	}
}

// TestEditFileThroughSymlinkEditsTarget: the link stays a link and the
// file it names changes.
func TestEditFileThroughSymlinkEditsTarget(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "data", "real.txt"), "v1\n")
	mustSymlink(t, "data/real.txt", filepath.Join(ws, "rel"))
	mustSymlink(t, filepath.Join(ws, "data", "real.txt"), filepath.Join(ws, "abs"))
	if _, err := edit(t, env, "rel", "v1", "v2", false); err != nil {
		t.Fatal(err)
	}
	if _, err := edit(t, env, "abs", "v2", "v3", false); err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, ws, "data/real.txt"); got != "v3\n" {
		t.Fatalf("target = %q", got)
	}
	for _, l := range []string{"rel", "abs"} {
		if fi, err := os.Lstat(filepath.Join(ws, l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink", l)
		}
	}
}

func TestEditFileBadInput(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "f.txt"), "hello\n")
	mustWrite(t, filepath.Join(ws, "bin.dat"), "a\x00b hello")
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, input, class, says string
	}{
		{"not an object", `[1]`, tool.ClassInvalidInput, "not a valid object"},
		{"path wrong type", `{"path":3,"old_string":"a","new_string":"b"}`, tool.ClassInvalidInput, "not a valid object"},
		{"missing path", `{"old_string":"a","new_string":"b"}`, tool.ClassInvalidInput, "path is required"},
		{"missing old_string", `{"path":"f.txt","new_string":"b"}`, tool.ClassInvalidInput, "old_string is required"},
		{"missing new_string", `{"path":"f.txt","old_string":"a"}`, tool.ClassInvalidInput, "new_string is required"},
		{"empty old_string", `{"path":"f.txt","old_string":"","new_string":"b"}`, tool.ClassInvalidInput, "write_file"},
		{"no change", `{"path":"f.txt","old_string":"hello","new_string":"hello"}`, tool.ClassInvalidInput, "nothing to change"},
		{"replace_all wrong type", `{"path":"f.txt","old_string":"hello","new_string":"x","replace_all":"yes"}`, tool.ClassInvalidInput, "not a valid object"},
		{"directory", `{"path":"dir","old_string":"a","new_string":"b"}`, tool.ClassInvalidInput, "directory"},
		{"trailing slash", `{"path":"f.txt/","old_string":"a","new_string":"b"}`, tool.ClassInvalidInput, "directory"},
		{"binary", `{"path":"bin.dat","old_string":"hello","new_string":"b"}`, tool.ClassInvalidInput, "binary"},
		{"missing file", `{"path":"nope.txt","old_string":"a","new_string":"b"}`, tool.ClassNotFound, "no such file"},
		{"escaping path", `{"path":"../x","old_string":"a","new_string":"b"}`, tool.ClassPermissionDenied, "leaves the workspace"},
		{"absolute path", `{"path":"/etc/passwd","old_string":"root","new_string":"b"}`, tool.ClassPermissionDenied, "absolute"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := tool.EditFile{}.Run(context.Background(), env, json.RawMessage(c.input))
			wantClass(t, err, c.class)
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("message %q does not say %q", err, c.says)
			}
		})
	}
	if readWS(t, ws, "f.txt") != "hello\n" {
		t.Error("f.txt changed")
	}
}

// TestEditFileConfined: every escaping path of the confinement fixture
// is refused and nothing changes anywhere.
func TestEditFileConfined(t *testing.T) {
	base, ws, _ := confineFixture(t)
	env := newEnv(t, ws)
	for _, p := range []string{"../outside/secret.txt", "link/secret.txt", "rel/secret.txt", "filelink", "relfile",
		"dangling", "reldangling", "chain1/secret.txt", "data/up/outside/secret.txt", "a\x00b"} {
		before := snapshot(t, base)
		_, err := edit(t, env, p, "TOP", "PWNED", false)
		wantClass(t, err, tool.ClassPermissionDenied)
		diffSnapshots(t, "edit_file "+p, before, snapshot(t, base))
	}
}

func TestEditFilePreviewWritesNothing(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "f.txt"), "a\nb\nc\n")
	in := json.RawMessage(`{"path":"f.txt","old_string":"b","new_string":"B"}`)
	ch, err := tool.EditFile{}.Preview(context.Background(), env, in)
	if err != nil {
		t.Fatal(err)
	}
	if readWS(t, ws, "f.txt") != "a\nb\nc\n" {
		t.Fatal("preview wrote the file")
	}
	res, err := tool.EditFile{}.Run(context.Background(), env, in)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Diff != res.Change.Diff || ch.Diff == "" {
		t.Errorf("preview diff %q, run diff %q", ch.Diff, res.Change.Diff)
	}
	if _, err := (tool.EditFile{}).Preview(context.Background(), env, in); tool.ClassOf(err) != tool.ClassInvalidInput {
		t.Errorf("preview of an edit that no longer applies: %v", err)
	}
}

func TestEditFileCancelledChangesNothing(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "f.txt"), "a\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tool.EditFile{}.Run(ctx, env, json.RawMessage(`{"path":"f.txt","old_string":"a","new_string":"b"}`))
	if tool.ClassOf(err) != tool.ClassCancelled {
		t.Fatalf("err = %v", err)
	}
	if readWS(t, ws, "f.txt") != "a\n" {
		t.Error("file changed")
	}
}

func TestEditFileTargetsAndKind(t *testing.T) {
	got, err := tool.EditFile{}.Targets(json.RawMessage(`{"path":"./src//a.go","old_string":"a","new_string":"b"}`))
	if err != nil || len(got) != 1 || got[0] != "src/a.go" {
		t.Fatalf("targets = %v, %v", got, err)
	}
	if _, err := (tool.EditFile{}).Targets(json.RawMessage(`{"path":"../a.go","old_string":"a","new_string":"b"}`)); err == nil {
		t.Error("an escaping path has targets")
	}
	if tool.KindOf(tool.EditFile{}) != tool.KindEdit {
		t.Error("edit_file is not an edit")
	}
}
