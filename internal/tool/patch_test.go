package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/tool"
)

func patch(t *testing.T, env tool.Env, p string) (tool.Result, error) {
	t.Helper()
	return run(t, tool.ApplyPatch{}, env, map[string]string{"patch": p})
}

// files writes the given workspace files.
func files(t *testing.T, ws string, fs map[string]string) {
	t.Helper()
	for p, c := range fs {
		mustWrite(t, filepath.Join(ws, p), c)
	}
}

// wantFiles checks the workspace holds exactly these regular files.
func wantFiles(t *testing.T, ws string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	_ = filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(ws, p)
			b, _ := os.ReadFile(p)
			got[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	for p, w := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s missing", p)
		} else if g != w {
			t.Errorf("%s = %q, want %q", p, g, w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected file %s (%q)", p, got[p])
		}
	}
}

// TestApplyPatchScenarios: what each construct of the format does, in
// the manner of Codex's conformance scenarios, with metis's choices
// where they differ (all or nothing; the last line of a file keeps its
// missing line end unless the patch touches it).
func TestApplyPatchScenarios(t *testing.T) {
	for _, c := range []struct {
		name   string
		before map[string]string
		patch  string
		after  map[string]string
		fails  string // a part of the error message; "" for success
	}{
		{name: "add file", before: map[string]string{},
			patch: "*** Begin Patch\n*** Add File: bar.md\n+This is a new file\n*** End Patch\n",
			after: map[string]string{"bar.md": "This is a new file\n"}},
		{name: "several operations",
			before: map[string]string{"delete.txt": "obsolete\n", "modify.txt": "line1\nline2\n"},
			patch:  "*** Begin Patch\n*** Add File: nested/new.txt\n+created\n*** Delete File: delete.txt\n*** Update File: modify.txt\n@@\n-line2\n+changed\n*** End Patch",
			after:  map[string]string{"nested/new.txt": "created\n", "modify.txt": "line1\nchanged\n"}},
		{name: "several chunks", before: map[string]string{"multi.txt": "line1\nline2\nline3\nline4\n"},
			patch: "*** Begin Patch\n*** Update File: multi.txt\n@@\n-line2\n+changed2\n@@\n-line4\n+changed4\n*** End Patch",
			after: map[string]string{"multi.txt": "line1\nchanged2\nline3\nchanged4\n"}},
		{name: "move to a new directory", before: map[string]string{"old/name.txt": "old content\n", "old/other.txt": "unrelated\n"},
			patch: "*** Begin Patch\n*** Update File: old/name.txt\n*** Move to: renamed/dir/name.txt\n@@\n-old content\n+new content\n*** End Patch",
			after: map[string]string{"renamed/dir/name.txt": "new content\n", "old/other.txt": "unrelated\n"}},
		{name: "move overwrites the destination", before: map[string]string{"a.txt": "from a\n", "b.txt": "was b\n"},
			patch: "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-from a\n+moved\n*** End Patch",
			after: map[string]string{"b.txt": "moved\n"}},
		{name: "add overwrites an existing file", before: map[string]string{"dup.txt": "old\n"},
			patch: "*** Begin Patch\n*** Add File: dup.txt\n+new\n*** End Patch",
			after: map[string]string{"dup.txt": "new\n"}},
		{name: "add an empty file", before: map[string]string{},
			patch: "*** Begin Patch\n*** Add File: empty.txt\n*** End Patch",
			after: map[string]string{"empty.txt": ""}},
		{name: "pure addition after a context line", before: map[string]string{"f.py": "def a():\n    pass\ndef b():\n    pass\n"},
			patch: "*** Begin Patch\n*** Update File: f.py\n@@ def a():\n+    # added\n*** End Patch",
			after: map[string]string{"f.py": "def a():\n    # added\n    pass\ndef b():\n    pass\n"}},
		{name: "pure addition without context appends", before: map[string]string{"f.txt": "one\n"},
			patch: "*** Begin Patch\n*** Update File: f.txt\n@@\n+two\n+three\n*** End Patch",
			after: map[string]string{"f.txt": "one\ntwo\nthree\n"}},
		{name: "whitespace around markers and headers", before: map[string]string{"f.txt": "a\nb\n"},
			patch: "  *** Begin Patch  \n*** Update File: f.txt   \n@@   \n-b\n+B\n  *** End Patch  ",
			after: map[string]string{"f.txt": "a\nB\n"}},
		{name: "heredoc wrapper", before: map[string]string{"f.txt": "a\n"},
			patch: "<<'EOF'\n*** Begin Patch\n*** Update File: f.txt\n@@\n-a\n+b\n*** End Patch\nEOF\n",
			after: map[string]string{"f.txt": "b\n"}},
		{name: "crlf patch text", before: map[string]string{"f.txt": "a\nb\n"},
			patch: "*** Begin Patch\r\n*** Update File: f.txt\r\n@@\r\n a\r\n-b\r\n+c\r\n*** End Patch\r\n",
			after: map[string]string{"f.txt": "a\nc\n"}},
		{name: "first chunk without @@", before: map[string]string{"f.py": "import foo\n"},
			patch: "*** Begin Patch\n*** Update File: f.py\n import foo\n+import bar\n*** End Patch",
			after: map[string]string{"f.py": "import foo\nimport bar\n"}},
		{name: "unicode", before: map[string]string{"u.txt": "héllo wörld\nñ\n"},
			patch: "*** Begin Patch\n*** Update File: u.txt\n@@\n-héllo wörld\n+こんにちは\n*** End Patch",
			after: map[string]string{"u.txt": "こんにちは\nñ\n"}},
		{name: "deletion only", before: map[string]string{"l.txt": "1\n2\n3\n"},
			patch: "*** Begin Patch\n*** Update File: l.txt\n@@\n 1\n-2\n 3\n*** End Patch",
			after: map[string]string{"l.txt": "1\n3\n"}},
		{name: "end of file marker picks the last occurrence", before: map[string]string{"t.txt": "x\nend\nx\nend\n"},
			patch: "*** Begin Patch\n*** Update File: t.txt\n@@\n x\n-end\n+END\n*** End of File\n*** End Patch",
			after: map[string]string{"t.txt": "x\nend\nx\nEND\n"}},
		{name: "context line narrows the place", before: map[string]string{"c.py": "def a():\n    return 1\ndef b():\n    return 1\n"},
			patch: "*** Begin Patch\n*** Update File: c.py\n@@ def b():\n-    return 1\n+    return 2\n*** End Patch",
			after: map[string]string{"c.py": "def a():\n    return 1\ndef b():\n    return 2\n"}},
		{name: "trailing whitespace ignored when seeking", before: map[string]string{"w.txt": "keep   \nold\t\n"},
			patch: "*** Begin Patch\n*** Update File: w.txt\n@@\n keep\n-old\n+new\n*** End Patch",
			after: map[string]string{"w.txt": "keep   \nnew\n"}},
		{name: "indentation ignored when seeking", before: map[string]string{"i.txt": "    a\n        b\n"},
			patch: "*** Begin Patch\n*** Update File: i.txt\n@@\n a\n-b\n+        c\n*** End Patch",
			after: map[string]string{"i.txt": "    a\n        c\n"}},
		{name: "typographic punctuation folded when seeking", before: map[string]string{"p.txt": "say “hi” – now\n"},
			patch: "*** Begin Patch\n*** Update File: p.txt\n@@\n-say \"hi\" - now\n+said\n*** End Patch",
			after: map[string]string{"p.txt": "said\n"}},
		{name: "a missing final line end is kept when the last line is untouched", before: map[string]string{"n.txt": "a\nb\nc"},
			patch: "*** Begin Patch\n*** Update File: n.txt\n@@\n-a\n+A\n*** End Patch",
			after: map[string]string{"n.txt": "A\nb\nc"}},
		{name: "the last line changed gets a line end", before: map[string]string{"n.txt": "a\nb"},
			patch: "*** Begin Patch\n*** Update File: n.txt\n@@\n a\n-b\n+B\n*** End Patch",
			after: map[string]string{"n.txt": "a\nB\n"}},
		{name: "blank line between chunks", before: map[string]string{"f.txt": "1\n2\n3\n4\n"},
			patch: "*** Begin Patch\n*** Update File: f.txt\n@@\n-1\n+one\n\n@@\n-4\n+four\n*** End Patch",
			after: map[string]string{"f.txt": "one\n2\n3\nfour\n"}},

		// Failures: nothing changes.
		{name: "empty patch", before: map[string]string{"foo.txt": "x\n"},
			patch: "*** Begin Patch\n*** End Patch", after: map[string]string{"foo.txt": "x\n"}, fails: "changes no file"},
		{name: "missing context", before: map[string]string{"m.txt": "line1\nline2\n"},
			patch: "*** Begin Patch\n*** Update File: m.txt\n@@\n-missing\n+x\n*** End Patch",
			after: map[string]string{"m.txt": "line1\nline2\n"}, fails: "chunk 1 of *** Update File: m.txt (patch line 3) does not apply"},
		{name: "delete of a missing file", before: map[string]string{"foo.txt": "x\n"},
			patch: "*** Begin Patch\n*** Delete File: missing.txt\n*** End Patch", after: map[string]string{"foo.txt": "x\n"}, fails: "no such file"},
		{name: "empty update section", before: map[string]string{"foo.txt": "x\n"},
			patch: "*** Begin Patch\n*** Update File: foo.txt\n*** End Patch", after: map[string]string{"foo.txt": "x\n"}, fails: "has no @@ chunk"},
		{name: "update of a missing file", before: map[string]string{"foo.txt": "x\n"},
			patch: "*** Begin Patch\n*** Update File: missing.txt\n@@\n-x\n+y\n*** End Patch", after: map[string]string{"foo.txt": "x\n"}, fails: "no such file"},
		{name: "delete of a directory", before: map[string]string{"dir/foo.txt": "x\n"},
			patch: "*** Begin Patch\n*** Delete File: dir\n*** End Patch", after: map[string]string{"dir/foo.txt": "x\n"}, fails: "is a directory"},
		{name: "invalid section header", before: map[string]string{"foo.txt": "x\n"},
			patch: "*** Begin Patch\n*** Frobnicate File: foo.txt\n*** End Patch", after: map[string]string{"foo.txt": "x\n"}, fails: "not a file section header"},
		{name: "a failure after a success changes nothing", before: map[string]string{"ok.txt": "a\n", "bad.txt": "b\n"},
			patch: "*** Begin Patch\n*** Add File: created.txt\n+hello\n*** Update File: ok.txt\n@@\n-a\n+A\n*** Update File: bad.txt\n@@\n-nope\n+x\n*** End Patch",
			after: map[string]string{"ok.txt": "a\n", "bad.txt": "b\n"}, fails: "*** Update File: bad.txt"},
		{name: "the same file twice", before: map[string]string{"f.txt": "a\nb\n"},
			patch: "*** Begin Patch\n*** Update File: f.txt\n@@\n-a\n+A\n*** Update File: f.txt\n@@\n-b\n+B\n*** End Patch",
			after: map[string]string{"f.txt": "a\nb\n"}, fails: "more than once"},
		{name: "chunks out of order", before: map[string]string{"f.txt": "1\n2\n3\n"},
			patch: "*** Begin Patch\n*** Update File: f.txt\n@@\n-3\n+three\n@@\n-1\n+one\n*** End Patch",
			after: map[string]string{"f.txt": "1\n2\n3\n"}, fails: "chunk 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, env := workspace(t)
			files(t, ws, c.before)
			res, err := patch(t, env, c.patch)
			if c.fails == "" && err != nil {
				t.Fatalf("apply: %v", err)
			}
			if c.fails != "" {
				wantClassIn(t, err, tool.ClassInvalidInput, tool.ClassNotFound)
				if !strings.Contains(err.Error(), c.fails) {
					t.Errorf("message %q does not say %q", err, c.fails)
				}
				if res.Change != nil {
					t.Error("a failed call reports a change")
				}
			}
			wantFiles(t, ws, c.after)
		})
	}
}

func wantClassIn(t *testing.T, err error, classes ...string) {
	t.Helper()
	for _, c := range classes {
		if tool.ClassOf(err) == c {
			return
		}
	}
	t.Fatalf("err = %v (class %s), want one of %v", err, tool.ClassOf(err), classes)
}

// TestApplyPatchKeepsCRLF: lines added to a CRLF file end in CRLF.
func TestApplyPatchKeepsCRLF(t *testing.T) {
	ws, env := workspace(t)
	files(t, ws, map[string]string{"w.txt": "one\r\ntwo\r\nthree\r\n"})
	if _, err := patch(t, env, "*** Begin Patch\n*** Update File: w.txt\n@@\n one\n-two\n+2\n+2.5\n three\n*** End Patch"); err != nil {
		t.Fatal(err)
	}
	wantFiles(t, ws, map[string]string{"w.txt": "one\r\n2\r\n2.5\r\nthree\r\n"})
}

func TestApplyPatchReportsChangeAndSummary(t *testing.T) {
	ws, env := workspace(t)
	files(t, ws, map[string]string{"m.txt": "a\nb\n", "d.txt": "gone\n", "from.txt": "x\n"})
	res, err := patch(t, env, "*** Begin Patch\n*** Add File: n.txt\n+new\n*** Update File: m.txt\n@@\n a\n-b\n+c\n*** Delete File: d.txt\n*** Update File: from.txt\n*** Move to: to.txt\n@@\n-x\n+y\n*** End Patch")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Success. Updated the following files:\nA n.txt\nM m.txt\nD d.txt\nM to.txt\n"; res.Content != want {
		t.Errorf("content = %q", res.Content)
	}
	if got := strings.Join(res.Change.Paths, " "); got != "n.txt m.txt d.txt from.txt to.txt" {
		t.Errorf("paths = %s", got)
	}
	for _, want := range []string{
		"--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+new\n",
		"--- a/m.txt\n+++ b/m.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n",
		"--- a/d.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n",
		"--- a/from.txt\n+++ b/to.txt\n@@ -1 +1 @@\n-x\n+y\n",
	} {
		if !strings.Contains(res.Change.Diff, want) {
			t.Errorf("diff lacks\n%s\nin\n%s", want, res.Change.Diff)
		}
	}
	if res.Change.DiffTruncated {
		t.Error("truncated")
	}
}

func TestApplyPatchBadInput(t *testing.T) {
	ws, env := workspace(t)
	files(t, ws, map[string]string{"f.txt": "a\n"})
	for _, c := range []struct{ name, input, class, says string }{
		{"not an object", `"x"`, tool.ClassInvalidInput, "not a valid object"},
		{"patch wrong type", `{"patch":42}`, tool.ClassInvalidInput, "not a valid object"},
		{"missing patch", `{}`, tool.ClassInvalidInput, "patch is required"},
		{"blank patch", `{"patch":"  \n"}`, tool.ClassInvalidInput, "patch is required"},
		{"no begin", `{"patch":"*** Update File: f.txt\n@@\n-a\n+b\n*** End Patch"}`, tool.ClassInvalidInput, "first line must be"},
		{"no end", `{"patch":"*** Begin Patch\n*** Update File: f.txt\n@@\n-a\n+b"}`, tool.ClassInvalidInput, "last line must be"},
		{"bad chunk line", `{"patch":"*** Begin Patch\n*** Update File: f.txt\n@@\nx\n*** End Patch"}`, tool.ClassInvalidInput, "line 4: unexpected line"},
		{"empty chunk", `{"patch":"*** Begin Patch\n*** Update File: f.txt\n@@\n*** End Patch"}`, tool.ClassInvalidInput, "a chunk with no lines"},
		{"second chunk without @@", `{"patch":"*** Begin Patch\n*** Update File: f.txt\n@@\n-a\n+b\n@x\n*** End Patch"}`, tool.ClassInvalidInput, "expected a chunk to start"},
		{"empty move", `{"patch":"*** Begin Patch\n*** Update File: f.txt\n*** Move to: \n@@\n-a\n+b\n*** End Patch"}`, tool.ClassInvalidInput, "needs a path"},
		{"empty path", `{"patch":"*** Begin Patch\n*** Delete File:  \n*** End Patch"}`, tool.ClassInvalidInput, "a file section without a path"},
		{"escaping add", `{"patch":"*** Begin Patch\n*** Add File: ../evil.txt\n+x\n*** End Patch"}`, tool.ClassPermissionDenied, "leaves the workspace"},
		{"absolute update", `{"patch":"*** Begin Patch\n*** Delete File: /etc/passwd\n*** End Patch"}`, tool.ClassPermissionDenied, "absolute"},
		{"escaping move", `{"patch":"*** Begin Patch\n*** Update File: f.txt\n*** Move to: ../out.txt\n@@\n-a\n+b\n*** End Patch"}`, tool.ClassPermissionDenied, "leaves the workspace"},
		{"context not found", `{"patch":"*** Begin Patch\n*** Update File: f.txt\n@@ func missing()\n-a\n+b\n*** End Patch"}`, tool.ClassInvalidInput, "@@ line \"func missing()\" was not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := tool.ApplyPatch{}.Run(context.Background(), env, json.RawMessage(c.input))
			wantClass(t, err, c.class)
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("message %q does not say %q", err, c.says)
			}
		})
	}
	wantFiles(t, ws, map[string]string{"f.txt": "a\n"})
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "evil.txt")); err == nil {
		t.Error("a file was created outside")
	}
}

// TestApplyPatchConfined: patches naming paths that lead out of the
// workspace through symlinks are refused and change nothing.
func TestApplyPatchConfined(t *testing.T) {
	base, ws, _ := confineFixture(t)
	env := newEnv(t, ws)
	for _, p := range []string{
		"*** Begin Patch\n*** Update File: link/secret.txt\n@@\n-TOP SECRET\n+PWNED\n*** End Patch",
		"*** Begin Patch\n*** Update File: filelink\n@@\n-TOP SECRET\n+PWNED\n*** End Patch",
		"*** Begin Patch\n*** Update File: relfile\n@@\n-TOP SECRET\n+PWNED\n*** End Patch",
		"*** Begin Patch\n*** Add File: link/new.txt\n+PWNED\n*** End Patch",
		"*** Begin Patch\n*** Add File: dangling\n+PWNED\n*** End Patch",
		"*** Begin Patch\n*** Add File: reldangling\n+PWNED\n*** End Patch",
		"*** Begin Patch\n*** Delete File: rel/secret.txt\n*** End Patch",
		"*** Begin Patch\n*** Delete File: chain1/secret.txt\n*** End Patch",
		"*** Begin Patch\n*** Update File: data/hello.txt\n*** Move to: data/up/outside/moved.txt\n@@\n-hello\n+x\n*** End Patch",
		"*** Begin Patch\n*** Update File: data/hello.txt\n*** Move to: link/moved.txt\n@@\n-hello\n+x\n*** End Patch",
	} {
		before := snapshot(t, base)
		_, err := patch(t, env, p)
		wantClass(t, err, tool.ClassPermissionDenied)
		diffSnapshots(t, p, before, snapshot(t, base))
	}
}

func TestApplyPatchPreviewWritesNothing(t *testing.T) {
	ws, env := workspace(t)
	files(t, ws, map[string]string{"f.txt": "a\n"})
	in := json.RawMessage(`{"patch":"*** Begin Patch\n*** Update File: f.txt\n@@\n-a\n+b\n*** Add File: g.txt\n+g\n*** End Patch"}`)
	ch, err := tool.ApplyPatch{}.Preview(context.Background(), env, in)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles(t, ws, map[string]string{"f.txt": "a\n"})
	res, err := tool.ApplyPatch{}.Run(context.Background(), env, in)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Diff != res.Change.Diff || strings.Join(ch.Paths, ",") != "f.txt,g.txt" {
		t.Errorf("preview %+v, run %+v", ch, res.Change)
	}
}

func TestApplyPatchTargetsAndKind(t *testing.T) {
	got, err := tool.ApplyPatch{}.Targets(json.RawMessage(`{"patch":"*** Begin Patch\n*** Add File: ./a//b.txt\n+x\n*** Delete File: c.txt\n*** Update File: d.txt\n*** Move to: e/f.txt\n@@\n-x\n+y\n*** End Patch"}`))
	if err != nil || strings.Join(got, " ") != "a/b.txt c.txt d.txt e/f.txt" {
		t.Fatalf("targets = %v, %v", got, err)
	}
	if _, err := (tool.ApplyPatch{}).Targets(json.RawMessage(`{"patch":"nonsense"}`)); err == nil {
		t.Error("an unparsable patch has targets")
	}
	if tool.KindOf(tool.ApplyPatch{}) != tool.KindEdit {
		t.Error("apply_patch is not an edit")
	}
}

// codexPatch turns a unified diff of one file into an Update File
// section.
func codexPatch(path, unified string) string {
	var sb strings.Builder
	sb.WriteString("*** Begin Patch\n*** Update File: " + path + "\n")
	for _, l := range strings.SplitAfter(unified, "\n") {
		switch {
		case l == "":
		case strings.HasPrefix(l, "@@"):
			sb.WriteString("@@\n")
		case strings.HasPrefix(l, `\`):
		default:
			sb.WriteString(l)
		}
	}
	sb.WriteString("*** End Patch\n")
	return sb.String()
}

// TestApplyPatchOfAGeneratedDiffReproducesTheTarget: for random files
// and random edits, apply_patch of the diff between them (in Codex's
// format) turns the first into the second, line ends included.
func TestApplyPatchOfAGeneratedDiffReproducesTheTarget(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 40).Draw(rt, "lines")
		next := 0
		line := func() string { next++; return fmt.Sprintf("line %d %s", next, strings.Repeat("x", next%3)) }
		var old []string
		for range n {
			old = append(old, line())
		}
		newLines := append([]string(nil), old...)
		for range rapid.IntRange(1, 6).Draw(rt, "edits") {
			at := rapid.IntRange(0, len(newLines)).Draw(rt, "at")
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0:
				newLines = append(newLines[:at], append([]string{line()}, newLines[at:]...)...)
			case 1:
				if at < len(newLines) {
					newLines = append(newLines[:at], newLines[at+1:]...)
				}
			case 2:
				if at < len(newLines) {
					newLines[at] = line()
				}
			}
		}
		eol := rapid.SampledFrom([]string{"\n", "\r\n"}).Draw(rt, "eol")
		join := func(ls []string) string {
			if len(ls) == 0 {
				return ""
			}
			return strings.Join(ls, eol) + eol
		}
		before, after := join(old), join(newLines)
		if before == after {
			return
		}
		dir, err := os.MkdirTemp("", "patchprop")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(before), 0o644); err != nil {
			rt.Fatal(err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			rt.Fatal(err)
		}
		defer root.Close()
		env := tool.Env{Root: root, Workspace: dir}
		// The diff is of the LF forms: a model writes patches without CR.
		lf := func(s string) []byte { return []byte(strings.ReplaceAll(s, "\r\n", "\n")) }
		p := codexPatch("f.txt", tool.UnifiedDiff(lf(before), lf(after), 3))
		in, _ := json.Marshal(map[string]string{"patch": p})
		if _, err := (tool.ApplyPatch{}).Run(context.Background(), env, in); err != nil {
			rt.Fatalf("apply %q: %v", p, err)
		}
		got, _ := os.ReadFile(filepath.Join(dir, "f.txt"))
		if before == "" {
			after = strings.ReplaceAll(after, "\r\n", "\n") // an empty file has no line end to follow
		}
		if string(got) != after {
			rt.Fatalf("patch\n%s\nmade %q, want %q", p, got, after)
		}
	})
}
