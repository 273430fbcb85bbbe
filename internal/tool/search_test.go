package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/tool"
)

// touch sets a file's modification time to base + d.
func touch(t *testing.T, p string, d time.Duration) {
	t.Helper()
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(d)
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

func TestGlobNewestFirst(t *testing.T) {
	ws, env := workspace(t)
	for i, p := range []string{"a/old.go", "b/new.go", "mid.go", "x.txt"} {
		mustWrite(t, filepath.Join(ws, p), "package x\n")
		touch(t, filepath.Join(ws, p), time.Duration(i)*time.Hour)
	}
	res, err := run(t, tool.Glob{}, env, map[string]any{"pattern": "**/*.go"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(lines(res.Content), " "); got != "mid.go b/new.go a/old.go" {
		t.Errorf("got %q", got)
	}
	// '*' stays in one directory; path narrows, results stay workspace-relative.
	res, _ = run(t, tool.Glob{}, env, map[string]any{"pattern": "*.go"})
	if res.Content != "mid.go\n" {
		t.Errorf("*.go = %q", res.Content)
	}
	res, _ = run(t, tool.Glob{}, env, map[string]any{"pattern": "*.go", "path": "b"})
	if res.Content != "b/new.go\n" {
		t.Errorf("*.go in b = %q", res.Content)
	}
	res, _ = run(t, tool.Glob{}, env, map[string]any{"pattern": "{a,b}/*.go"})
	if got := strings.Join(lines(res.Content), " "); got != "b/new.go a/old.go" {
		t.Errorf("braces: %q", got)
	}
	res, _ = run(t, tool.Glob{}, env, map[string]any{"pattern": "**/*.rs"})
	if !strings.HasPrefix(res.Content, "no files match") {
		t.Errorf("no match: %q", res.Content)
	}
}

// gitignoreFixture builds a workspace with nested .gitignore files.
func gitignoreFixture(t *testing.T) (string, tool.Env) {
	ws, env := workspace(t)
	for p, c := range map[string]string{
		".gitignore":            "*.log\n!keep.log\nbuild/\n/top.tmp\n",
		"keep.log":              "needle\n",
		"drop.log":              "needle\n",
		"build/out.txt":         "needle\n",
		"src/build":             "needle\n", // a file: "build/" is for directories
		"top.tmp":               "needle\n",
		"src/top.tmp":           "needle\n",
		"src/.gitignore":        "gen/\n!*.log\n",
		"src/gen/x.go":          "needle\n",
		"src/app.log":           "needle\n",
		"src/main.go":           "needle\n",
		".git/config":           "needle\n",
		".git/info/exclude":     "excluded.txt\n",
		"excluded.txt":          "needle\n",
		"node_modules/m/i.js":   "needle\n",
		"node_modules/.gitkeep": "",
	} {
		mustWrite(t, filepath.Join(ws, p), c)
	}
	mustWrite(t, filepath.Join(ws, ".gitignore"), "*.log\n!keep.log\nbuild/\n/top.tmp\nnode_modules\n")
	return ws, env
}

var visible = []string{"keep.log", "src/build", "src/top.tmp", "src/app.log", "src/main.go", ".gitignore", "src/.gitignore"}

func TestGlobRespectsGitignore(t *testing.T) {
	_, env := gitignoreFixture(t)
	res, err := run(t, tool.Glob{}, env, map[string]any{"pattern": "**"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, l := range lines(res.Content) {
		got[l] = true
	}
	for _, p := range visible {
		if !got[p] {
			t.Errorf("%s missing", p)
		}
	}
	if len(got) != len(visible) {
		t.Errorf("got %v", got)
	}
}

func TestGrepRespectsGitignore(t *testing.T) {
	_, env := gitignoreFixture(t)
	res, err := run(t, tool.Grep{}, env, map[string]any{"pattern": "needle"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines(res.Content) {
		got = append(got, strings.TrimSuffix(l, ":1:needle"))
	}
	if len(got) != 5 {
		t.Errorf("got %v", got)
	}
	// A path named outright is searched even if ignored.
	res, err = run(t, tool.Grep{}, env, map[string]any{"pattern": "needle", "path": "drop.log"})
	if err != nil || res.Content != "drop.log:1:needle\n" {
		t.Errorf("named file: %q %v", res.Content, err)
	}
}

func TestGlobCapsResults(t *testing.T) {
	ws, env := workspace(t)
	for i := range tool.MaxGlobResults + 50 {
		mustWrite(t, filepath.Join(ws, fmt.Sprintf("f%03d.txt", i)), "")
	}
	res, err := run(t, tool.Glob{}, env, map[string]any{"pattern": "*.txt"})
	if err != nil {
		t.Fatal(err)
	}
	l := lines(res.Content)
	if len(l) != tool.MaxGlobResults+1 || !strings.Contains(l[len(l)-1], "50 more files match") {
		t.Errorf("%d lines, last %q", len(l), l[len(l)-1])
	}
	if !strings.Contains(res.Summary, "150 files") {
		t.Errorf("summary %q", res.Summary)
	}
}

// TestSearchesNeverLeaveTheWorkspace: symbolic links to directories are
// not followed, links to files only when the file is inside.
func TestSearchesNeverLeaveTheWorkspace(t *testing.T) {
	_, ws, _ := confineFixture(t)
	env := newEnv(t, ws)
	res, err := run(t, tool.Grep{}, env, map[string]any{"pattern": "SECRET|hello|deep"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Content, "SECRET") || strings.Contains(res.Content, "deep") {
		t.Fatalf("grep read outside the workspace:\n%s", res.Content)
	}
	for _, want := range []string{"data/hello.txt:1:hello", "infile:1:hello"} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("grep lacks %q:\n%s", want, res.Content)
		}
	}
	res, err = run(t, tool.Glob{}, env, map[string]any{"pattern": "**"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines(res.Content) {
		if strings.Contains(l, "secret") || strings.Contains(l, "deep") || strings.HasPrefix(l, "link/") || strings.HasPrefix(l, "data/up/") {
			t.Errorf("glob listed %s", l)
		}
	}
	for _, p := range []string{"link", "rel", "data/up", "chain1"} {
		_, err := run(t, tool.Grep{}, env, map[string]any{"pattern": "x", "path": p})
		wantClass(t, err, tool.ClassPermissionDenied)
		_, err = run(t, tool.Glob{}, env, map[string]any{"pattern": "*", "path": p})
		wantClass(t, err, tool.ClassPermissionDenied)
	}
	_, err = run(t, tool.Glob{}, env, map[string]any{"pattern": "link/*"})
	wantClass(t, err, tool.ClassPermissionDenied)
}

func TestGrepFormatsMatches(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "a.go"), "package a\n\nfunc Alpha() {}\nfunc beta() {}\r\n// ALPHA\n")
	mustWrite(t, filepath.Join(ws, "doc/b.md"), "alpha and omega\n")
	touch(t, filepath.Join(ws, "a.go"), time.Hour)
	touch(t, filepath.Join(ws, "doc/b.md"), 0)
	res, err := run(t, tool.Grep{}, env, map[string]any{"pattern": `func \w+`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "a.go:3:func Alpha() {}\na.go:4:func beta() {}\n" {
		t.Errorf("content %q", res.Content)
	}
	res, _ = run(t, tool.Grep{}, env, map[string]any{"pattern": "alpha", "ignore_case": true})
	if res.Content != "a.go:3:func Alpha() {}\na.go:5:// ALPHA\ndoc/b.md:1:alpha and omega\n" {
		t.Errorf("ignore_case: %q", res.Content)
	}
	res, _ = run(t, tool.Grep{}, env, map[string]any{"pattern": "alpha", "ignore_case": true, "glob": "*.md"})
	if res.Content != "doc/b.md:1:alpha and omega\n" {
		t.Errorf("glob by name: %q", res.Content)
	}
	res, _ = run(t, tool.Grep{}, env, map[string]any{"pattern": "alpha", "ignore_case": true, "glob": "doc/*"})
	if res.Content != "doc/b.md:1:alpha and omega\n" {
		t.Errorf("glob by path: %q", res.Content)
	}
	res, _ = run(t, tool.Grep{}, env, map[string]any{"pattern": "beta", "context": 1})
	if res.Content != "a.go-3-func Alpha() {}\na.go:4:func beta() {}\na.go-5-// ALPHA\n" {
		t.Errorf("context: %q", res.Content)
	}
	res, _ = run(t, tool.Grep{}, env, map[string]any{"pattern": "nothing here"})
	if !strings.HasPrefix(res.Content, "no matches") {
		t.Errorf("no match: %q", res.Content)
	}
}

func TestGrepContextGroups(t *testing.T) {
	ws, env := workspace(t)
	var sb strings.Builder
	for i := 1; i <= 20; i++ {
		if i == 5 || i == 7 || i == 15 {
			fmt.Fprintf(&sb, "hit %d\n", i)
		} else {
			fmt.Fprintf(&sb, "line %d\n", i)
		}
	}
	mustWrite(t, filepath.Join(ws, "f.txt"), sb.String())
	res, err := run(t, tool.Grep{}, env, map[string]any{"pattern": "^hit", "context": 2})
	if err != nil {
		t.Fatal(err)
	}
	want := "f.txt-3-line 3\nf.txt-4-line 4\nf.txt:5:hit 5\nf.txt-6-line 6\nf.txt:7:hit 7\nf.txt-8-line 8\nf.txt-9-line 9\n--\n" +
		"f.txt-13-line 13\nf.txt-14-line 14\nf.txt:15:hit 15\nf.txt-16-line 16\nf.txt-17-line 17\n"
	if res.Content != want {
		t.Errorf("got\n%s\nwant\n%s", res.Content, want)
	}
}

func TestGrepSkipsBinaryFiles(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "bin.dat"), "needle\x00\x01")
	mustWrite(t, filepath.Join(ws, "text.txt"), "needle\n")
	res, err := run(t, tool.Grep{}, env, map[string]any{"pattern": "needle"})
	if err != nil || res.Content != "text.txt:1:needle\n" {
		t.Errorf("%q %v", res.Content, err)
	}
}

func TestGrepCapsOutput(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "many.txt"), strings.Repeat("match me\n", tool.MaxGrepLines+300))
	mustWrite(t, filepath.Join(ws, "long.txt"), "match "+strings.Repeat("y", 5000)+"\n")
	res, err := run(t, tool.Grep{}, env, map[string]any{"pattern": "match"})
	if err != nil {
		t.Fatal(err)
	}
	l := lines(res.Content)
	if len(l) != tool.MaxGrepLines+1 || !strings.Contains(l[len(l)-1], fmt.Sprintf("%d matching lines in 2 files", tool.MaxGrepLines+301)) {
		t.Errorf("%d lines, last %q", len(l), l[len(l)-1])
	}
	for _, x := range l {
		if len(x) > 600 {
			t.Errorf("a line of %d bytes", len(x))
		}
	}
	if len(res.Content) > tool.MaxGrepBytes+500 {
		t.Errorf("%d bytes", len(res.Content))
	}
}

func TestSearchBadInput(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "f.txt"), "x\n")
	for _, c := range []struct {
		tl          tool.Tool
		input, says string
		class       string
	}{
		{tool.Glob{}, `{}`, "pattern is required", tool.ClassInvalidInput},
		{tool.Glob{}, `{"pattern":7}`, "not a valid object", tool.ClassInvalidInput},
		{tool.Glob{}, `{"pattern":"../*"}`, "leaves the workspace", tool.ClassInvalidInput},
		{tool.Glob{}, `{"pattern":"a/../../b"}`, "leaves the workspace", tool.ClassInvalidInput},
		{tool.Glob{}, `{"pattern":"/etc/*"}`, "absolute", tool.ClassInvalidInput},
		{tool.Glob{}, `{"pattern":"[abc"}`, "not a valid glob", tool.ClassInvalidInput},
		{tool.Glob{}, `{"pattern":"*","path":"f.txt"}`, "not a directory", tool.ClassInvalidInput},
		{tool.Glob{}, `{"pattern":"*","path":"../"}`, "leaves the workspace", tool.ClassPermissionDenied},
		{tool.Glob{}, `{"pattern":"*","path":"nope"}`, "no such file", tool.ClassNotFound},
		{tool.Grep{}, `{}`, "pattern is required", tool.ClassInvalidInput},
		{tool.Grep{}, `{"pattern":"(unclosed"}`, "does not compile", tool.ClassInvalidInput},
		{tool.Grep{}, `{"pattern":"(?=look)"}`, "no lookaround", tool.ClassInvalidInput},
		{tool.Grep{}, `{"pattern":"x","context":21}`, "0 to 20", tool.ClassInvalidInput},
		{tool.Grep{}, `{"pattern":"x","context":-1}`, "0 to 20", tool.ClassInvalidInput},
		{tool.Grep{}, `{"pattern":"x","ignore_case":"yes"}`, "not a valid object", tool.ClassInvalidInput},
		{tool.Grep{}, `{"pattern":"x","glob":"{a"}`, "not a valid glob", tool.ClassInvalidInput},
		{tool.Grep{}, `{"pattern":"x","glob":"../*.go"}`, "leaves the workspace", tool.ClassInvalidInput},
		{tool.Grep{}, `{"pattern":"x","path":"/etc"}`, "absolute", tool.ClassPermissionDenied},
	} {
		_, err := c.tl.Run(context.Background(), env, json.RawMessage(c.input))
		wantClass(t, err, c.class)
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s %s: %v does not say %q", c.tl.Spec().Name, c.input, err, c.says)
		}
	}
}

func TestSearchCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	ws, env := workspace(t)
	for i := range 200 {
		mustWrite(t, filepath.Join(ws, fmt.Sprintf("d%d/f.txt", i)), "x\n")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for tl, in := range map[tool.Tool]string{tool.Grep{}: `{"pattern":"x"}`, tool.Glob{}: `{"pattern":"**"}`} {
		_, err := tl.Run(ctx, env, json.RawMessage(in))
		if tool.ClassOf(err) != tool.ClassCancelled {
			t.Errorf("%s: %v", tl.Spec().Name, err)
		}
	}
}

func TestSearchToolsKindAndTargets(t *testing.T) {
	for _, tl := range []tool.Tool{tool.Grep{}, tool.Glob{}} {
		if tool.KindOf(tl) != tool.KindRead {
			t.Errorf("%s is not a read", tl.Spec().Name)
		}
		got, err := tl.(tool.Targeted).Targets(json.RawMessage(`{"pattern":"x","path":"./src/"}`))
		if err != nil || len(got) != 1 || got[0] != "src" {
			t.Errorf("%s targets %v %v", tl.Spec().Name, got, err)
		}
		got, err = tl.(tool.Targeted).Targets(json.RawMessage(`{"pattern":"x"}`))
		if err != nil || len(got) != 1 || got[0] != "." {
			t.Errorf("%s default target %v %v", tl.Spec().Name, got, err)
		}
	}
}
