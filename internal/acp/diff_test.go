package acp

import (
	"context"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/internal/servertest"
)

const sampleDiff = `diff --git a/main.go b/main.go
--- a/main.go
+++ b/main.go
@@ -1,3 +1,3 @@
 package main
-var x = 1
+var x = 2
 func main() {}
@@ -10 +10,2 @@ func f() {
-	return
+	log()
+	return
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
\ No newline at end of file
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/logo.png b/logo.png
Binary files a/logo.png and b/logo.png differ
`

// A git-style diff becomes one ACP diff content per hunk (context and
// removed lines as the old text, context and added lines as the new),
// with the file's absolute path; a new file has no old text; a
// location per hunk points at its first line; a binary change is a line
// of text.
func TestDiffContentPerHunk(t *testing.T) {
	content, locs := diffContent(sampleDiff, false, "/ws")
	type want struct {
		path, old, new string
		hasOld         bool
	}
	wants := []want{
		{"/ws/main.go", "package main\nvar x = 1\nfunc main() {}\n", "package main\nvar x = 2\nfunc main() {}\n", true},
		{"/ws/main.go", "\treturn\n", "\tlog()\n\treturn\n", true},
		{"/ws/new.txt", "", "hello\nworld\n", false},
		{"/ws/old.txt", "bye\n", "", true},
	}
	if len(content) != len(wants)+1 {
		t.Fatalf("%d contents, want %d", len(content), len(wants)+1)
	}
	for i, w := range wants {
		d := content[i].Diff
		if d == nil || d.Path != w.path || d.NewText != w.new || (d.OldText != nil) != w.hasOld || (w.hasOld && *d.OldText != w.old) {
			t.Errorf("content %d: %+v, want %+v", i, d, w)
		}
	}
	if c := content[4].Content; c == nil || !strings.Contains(c.Content.Text.Text, "logo.png") {
		t.Errorf("binary: %+v", content[4])
	}
	lines := []int{1, 10, 1, 1}
	for i, l := range lines {
		if locs[i].Line == nil || *locs[i].Line != l {
			t.Errorf("location %d: %+v, want line %d", i, locs[i], l)
		}
	}
	if len(locs) != 5 || locs[4].Path != "/ws/logo.png" {
		t.Errorf("locations %+v", locs)
	}
}

// A diff cut short (diff_truncated) says so after what it holds.
func TestDiffContentTruncated(t *testing.T) {
	content, _ := diffContent("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+b\n[diff truncated: showing 10 of 99 bytes]\n", true, "/ws")
	if len(content) != 2 || content[0].Diff == nil || content[0].Diff.NewText != "b\n" || content[1].Content == nil ||
		!strings.Contains(content[1].Content.Content.Text.Text, "cut short") {
		t.Fatalf("content %+v", content)
	}
}

// Lines that are not a diff give nothing, and never a path.
func TestDiffContentOfNoise(t *testing.T) {
	for _, in := range []string{"", "hello\nworld", "@@ -1 +1 @@\n-a\n+b\n", "+++ \n@@ x @@\n"} {
		if content, _ := diffContent(in, false, "/ws"); len(content) != 0 {
			t.Errorf("%q gave %+v", in, content)
		}
	}
}

// FuzzParseUnifiedDiff: whatever the text, the parser returns without
// panicking, within its bounds, and every hunk belongs to a file.
func FuzzParseUnifiedDiff(f *testing.F) {
	f.Add(sampleDiff)
	f.Add("--- a/x\n+++ b/x\n@@ -1,99999999 +1 @@\n-a\n")
	f.Add("@@ -1,-1 +a,b @@\n")
	f.Add("diff --git a/x b/x\n--- \"a/sp ace\"\t2020\n+++ \"b/sp ace\"\n@@ -1 +1 @@\n-\n+\n\\ x\n")
	f.Fuzz(func(t *testing.T, in string) {
		files := parseUnifiedDiff(in)
		if len(files) > maxDiffFiles {
			t.Fatalf("%d files", len(files))
		}
		n := 0
		for _, fl := range files {
			n += len(fl.hunks)
			for _, h := range fl.hunks {
				if len(h.oldText)+len(h.newText) > 2*len(in)+2 {
					t.Fatalf("a hunk longer than its input")
				}
			}
		}
		if n > maxDiffHunks {
			t.Fatalf("%d hunks", n)
		}
		diffContent(in, true, "/ws")
	})
}

// An edit in a turn reaches the editor as diff content with locations,
// beside the tool's result; rawOutput names the paths.
func TestEditToolDiffReachesTheEditor(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s, sid := openSession(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.prompt(ctx, sid, `/tool edit_file {"path": "README.md", "old_string": "content of", "new_string": "the text of"}`); err != nil {
		t.Fatal(err)
	}
	var done *sdk.SessionToolCallUpdate
	for _, u := range s.ed.all() {
		if tu := u.ToolCallUpdate; tu != nil && tu.Status != nil && *tu.Status == sdk.ToolCallStatusCompleted {
			done = tu
		}
	}
	if done == nil || len(done.Content) < 2 || done.Content[0].Diff == nil {
		t.Fatalf("completed update %+v; updates %s", done, describe(s.ed.all()))
	}
	d := done.Content[0].Diff
	if d.Path != h.Workspace+"/README.md" || d.OldText == nil || *d.OldText != "content of README.md\n" || d.NewText != "the text of README.md\n" {
		t.Errorf("diff %+v", d)
	}
	if len(done.Locations) != 1 || done.Locations[0].Path != h.Workspace+"/README.md" || done.Locations[0].Line == nil || *done.Locations[0].Line != 1 {
		t.Errorf("locations %+v", done.Locations)
	}
	if out, ok := done.RawOutput.(map[string]any); !ok || out["paths"] == nil {
		t.Errorf("raw output %+v", done.RawOutput)
	}
}
