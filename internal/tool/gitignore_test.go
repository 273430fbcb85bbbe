package tool

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestWildmatch(t *testing.T) {
	for _, c := range []struct {
		pattern, text string
		want          bool
	}{
		{"*.go", "a.go", true},
		{"*.go", "dir/a.go", false},
		{"a?c", "abc", true},
		{"a?c", "a/c", false},
		{"**/foo", "foo", true},
		{"**/foo", "a/b/foo", true},
		{"**/foo", "a/b/foox", false},
		// A single star that finds no ".log" in its path part leaves
		// the "**" before it free to take more directories.
		{"**/*.log", "ab/e/x.log", true},
		{"**/*.log", "ab/é/x.log", true},
		{"**/*.log", "ab/e/x.txt", false},
		{"foo/**", "foo/a/b", true},
		{"foo/**", "foo", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/xb", false},
		{"a**b", "axyb", true},
		{"a**b", "ax/yb", false},
		{"[abc].txt", "b.txt", true},
		{"[!abc].txt", "b.txt", false},
		{"[^abc].txt", "d.txt", true},
		{"[a-c]x", "bx", true},
		{"[a-c]x", "dx", false},
		{"[[:digit:]]*", "9lives", true},
		{"[[:upper:]]", "q", false},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{"[/]", "/", false},
		{"[abc", "a", false},
		{"*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 60), false},
		{"**/**/**/**/x", strings.Repeat("a/", 30) + "y", false},
		{"é*", "été", true},
		{"?", "é", false}, // bytes, as git
		{"??", "é", true},
	} {
		if got := wildmatch(c.pattern, c.text); got != c.want {
			t.Errorf("wildmatch(%q, %q) = %v, want %v", c.pattern, c.text, got, c.want)
		}
	}
}

func TestIgnoreRules(t *testing.T) {
	root := (*ignoreSet)(nil).with(parseIgnore([]byte("# comment\n\n*.log\n!keep.log\nbuild/\n/top.txt\ndocs/*.md\n\\#hash\ntrail\\ \nspaces   \n"), ""))
	sub := root.with(parseIgnore([]byte("!*.log\nlocal\n"), "sub"))
	for _, c := range []struct {
		set  *ignoreSet
		path string
		dir  bool
		want bool
	}{
		{root, "a.log", false, true},
		{root, "x/y/a.log", false, true},
		{root, "keep.log", false, false},
		{root, "build", true, true},
		{root, "build", false, false}, // dir-only
		{root, "x/build", true, true},
		{root, "top.txt", false, true},
		{root, "x/top.txt", false, false}, // anchored
		{root, "docs/a.md", false, true},
		{root, "docs/x/a.md", false, false},
		{root, "#hash", false, true},
		{root, "trail ", false, true},
		{root, "spaces", false, true},
		{sub, "sub/a.log", false, false}, // re-included by the deeper file
		{sub, "other/a.log", false, true},
		{sub, "sub/local", false, true},
		{sub, "local", false, false}, // the sub file's rules stay in sub
	} {
		if got := c.set.ignored(c.path, c.dir); got != c.want {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", c.path, c.dir, got, c.want)
		}
	}
}

// TestIgnoreMatchesGit: for random .gitignore files and paths, a path is
// ignored by metis's rules (itself or a directory above it) exactly when
// git check-ignore says so. Each rapid case is a directory of one
// repository (its .gitignore applies below it), so one git call checks
// them all.
func TestIgnoreMatchesGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	parts := []string{"a", "b", "ab", "x.log", "é"}
	pats := []string{"a", "b", "*", "**", "?", "??", "[ab]", "[!a]*", "*.log", "a*", "é", `\a`, "[[:alpha:]]"}
	repo := t.TempDir()
	type testCase struct {
		gi    string
		set   *ignoreSet
		isDir map[string]bool // every path of the case, workspace-relative
	}
	var cases []testCase
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		base := fmt.Sprintf("case%03d", n)
		n++
		var lines []string
		for range rapid.IntRange(1, 5).Draw(rt, "rules") {
			var segs []string
			for range rapid.IntRange(1, 3).Draw(rt, "segs") {
				segs = append(segs, rapid.SampledFrom(pats).Draw(rt, "seg"))
			}
			l := strings.Join(segs, "/")
			if rapid.Bool().Draw(rt, "lead") {
				l = "/" + l
			}
			if rapid.Bool().Draw(rt, "dironly") {
				l += "/"
			}
			if rapid.IntRange(0, 3).Draw(rt, "neg") == 0 {
				l = "!" + l
			}
			lines = append(lines, l)
		}
		c := testCase{gi: strings.Join(lines, "\n") + "\n", isDir: map[string]bool{}}
		c.set = (*ignoreSet)(nil).with(parseIgnore([]byte(c.gi), base))
		for range rapid.IntRange(1, 6).Draw(rt, "files") {
			var segs []string
			for range rapid.IntRange(1, 3).Draw(rt, "depth") {
				segs = append(segs, rapid.SampledFrom(parts).Draw(rt, "part"))
			}
			f := base + "/" + strings.Join(segs, "/")
			// A name is a file or a directory, the first use decides.
			ok := true
			if dir, seen := c.isDir[f]; seen && dir {
				ok = false
			}
			for d := filepath.Dir(f); d != base; d = filepath.Dir(d) {
				if dir, seen := c.isDir[d]; seen && !dir {
					ok = false
				}
			}
			if !ok {
				continue
			}
			c.isDir[f] = false
			for d := filepath.Dir(f); d != base; d = filepath.Dir(d) {
				c.isDir[d] = true
			}
		}
		if err := os.MkdirAll(filepath.Join(repo, base), 0o755); err != nil {
			rt.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, base, ".gitignore"), []byte(c.gi), 0o644); err != nil {
			rt.Fatal(err)
		}
		for p, dir := range c.isDir {
			if dir {
				if err := os.MkdirAll(filepath.Join(repo, p), 0o755); err != nil {
					rt.Fatal(err)
				}
			}
		}
		for p, dir := range c.isDir {
			if !dir {
				if err := os.WriteFile(filepath.Join(repo, p), nil, 0o644); err != nil {
					rt.Fatal(err)
				}
			}
		}
		cases = append(cases, c)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	var paths []string
	for _, c := range cases {
		for p := range c.isDir {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "-c", "core.quotePath=false", "check-ignore", "--no-index", "--stdin")
	cmd.Stdin = strings.NewReader(strings.Join(paths, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil && len(out) > 0 {
		t.Fatalf("git check-ignore: %v", err)
	}
	gitIgnored := map[string]bool{}
	for _, l := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		gitIgnored[l] = true
	}
	for _, c := range cases {
		for p := range c.isDir {
			// As the walk sees it: ignored itself, or under an ignored
			// directory (git check-ignore reports both).
			mine := false
			for q := p; strings.Contains(q, "/") && !mine; q = filepath.Dir(q) {
				mine = c.set.ignored(q, c.isDir[q])
			}
			if mine != gitIgnored[p] {
				t.Errorf(".gitignore\n%s\npath %q (dir %v): metis %v, git %v", c.gi, p, c.isDir[p], mine, gitIgnored[p])
			}
		}
	}
	t.Logf("%d cases, %d paths compared with git", len(cases), len(paths))
}
