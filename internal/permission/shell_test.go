package permission

import (
	"slices"
	"strings"
	"testing"
)

func commandsOf(l Line) []string {
	var out []string
	for _, c := range l.Commands {
		out = append(out, c.String())
	}
	return out
}

// TestSplitShellFindsEverySimpleCommand: the simple commands of a line
// are found wherever the shell would run them.
func TestSplitShellFindsEverySimpleCommand(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"git status", []string{"git status"}},
		{"git status && rm -rf ~", []string{"git status", "rm -rf ~"}},
		{"git status; rm -rf x", []string{"git status", "rm -rf x"}},
		{"git status || rm x", []string{"git status", "rm x"}},
		{"git log | head -5 | rm y", []string{"git log", "head -5", "rm y"}},
		{"git status & rm z", []string{"git status", "rm z"}},
		{"(git status; rm a)", []string{"git status", "rm a"}},
		{"{ git status; rm b; }", []string{"git status", "rm b"}},
		{"git log $(rm c)", []string{"git log $…", "rm c"}},
		{"git log `rm d`", []string{"git log $…", "rm d"}},
		{`git log "$(rm e)"`, []string{"git log $…", "rm e"}},
		{"diff <(rm f) x", []string{"diff $… x", "rm f"}},
		{"cat <<EOF\n$(rm g)\nEOF", []string{"cat", "rm g"}},
		{"f() { rm h; }; f", []string{"rm h", "f"}},
		{"if git diff --quiet; then rm i; fi", []string{"git diff --quiet", "rm i"}},
		{"while true; do rm j; done", []string{"true", "rm j"}},
		{"for x in a b; do rm k; done", []string{"rm k"}},
		{"case x in y) rm l;; esac", []string{"rm l"}},
		{"X=$(rm m) git status", []string{"git status", "rm m"}},
		{"sh -c 'git status && rm n'", []string{"sh -c git status && rm n", "git status", "rm n"}},
		{`bash -lc "rm o"`, []string{"bash -lc rm o", "rm o"}},
		{"eval 'rm p'", []string{"eval rm p", "rm p"}},
		{"sudo bash -c 'rm q'", []string{"sudo bash -c rm q", "rm q"}},
		{"! git status", []string{"git status"}},
		{"time rm r", []string{"rm r"}},
		{"'r'm s", []string{"rm s"}},
		{`r\m t`, []string{"rm t"}},
		{`"git" "status"`, []string{"git status"}},
	} {
		l := SplitShell(tc.line)
		if got := commandsOf(l); !slices.Equal(got, tc.want) {
			t.Errorf("%q: commands %q, want %q (opaque %q)", tc.line, got, tc.want, l.Opaque)
		}
	}
}

// TestSplitShellOpaque: what cannot be judged says why.
func TestSplitShellOpaque(t *testing.T) {
	for _, line := range []string{
		"git status &&",        // does not parse
		"$X -rf /",             // command name not plain text
		"$(echo rm) -rf /",     // command substitution as the name
		"`echo rm` x",          // the same with backticks
		"/bin/r? -rf /",        // a glob as the name
		"{rm,-rf,/}",           // brace expansion (bash) as the name
		"PATH=/tmp git status", // a variable that decides what runs
		"export PATH=/tmp",     // the same through export
		"LD_PRELOAD=x.so ls",   // the same for what loads
		"echo $((a[$(rm x)]))", // arithmetic
		"((x))",                // arithmetic command
		"let x=1",              // let
		"[[ $x -eq 1 ]]",       // arithmetic test
		"test -v 'a[$(rm x)]'", // a variable test
		"sh -c \"$SCRIPT\"",    // a script that is not plain text
		"eval \"$X\"",          // eval of something unknown
		"echo \x01",            // control bytes
		"$'\\x72m' -rf /",      // ANSI-C quoting as the name
		"a[$(rm x)]=1",         // an array subscript
		"for ((i=0;i<3;i++)); do :; done",
	} {
		l := SplitShell(line)
		if l.Opaque == "" {
			t.Errorf("%q: not opaque; commands %q", line, commandsOf(l))
		}
	}
	for _, line := range []string{"git status", "go test ./... 2>&1 | tail -20", "ls -la > /dev/null",
		"find . -name '*.go' -exec grep -l x {} \\;", "echo \"$HOME\"", "FOO=1 go test"} {
		if l := SplitShell(line); l.Opaque != "" {
			t.Errorf("%q: opaque (%s)", line, l.Opaque)
		}
	}
}

// TestSplitShellWrites: redirections that write are writes; inputs and
// descriptor duplications are not.
func TestSplitShellWrites(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"echo x > out.txt", []string{"out.txt"}},
		{"echo x >> log", []string{"log"}},
		{"echo x &> all", []string{"all"}},
		{"echo x >| clob", []string{"clob"}},
		{"cat <> rw", []string{"rw"}},
		{"echo x >& both", []string{"both"}},
		{"echo x 2>&1 > /dev/null", nil},
		{"echo x >&2", nil},
		{"cat < in.txt", nil},
		{"cat <<EOF\nx\nEOF", nil},
		{"echo x > \"$F\"", []string{string(hole)}},
		{"(echo x > sub/a) && echo y > ~/b", []string{"sub/a", "~/b"}},
	} {
		if got := SplitShell(tc.line).Writes; !slices.Equal(got, tc.want) {
			t.Errorf("%q: writes %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestWrapperCandidates: a wrapper's arguments are judged as commands
// too (for deny and ask rules).
func TestWrapperCandidates(t *testing.T) {
	l := SplitShell("sudo -u root rm -rf /")
	var got []string
	for _, c := range l.Commands[0].candidates() {
		got = append(got, c.String())
	}
	if !slices.Contains(got, "rm -rf /") {
		t.Fatalf("candidates %q lack the wrapped command", got)
	}
	if n := len(SplitShell("git status").Commands[0].candidates()); n != 1 {
		t.Fatalf("a plain command has %d candidates", n)
	}
}

func FuzzSplitShell(f *testing.F) {
	for _, s := range []string{"git status && rm -rf ~", "a | b; c & (d) { e; }", "x=$(y) z `w` <(v) > f",
		"sh -c 'eval \"rm x\"'", "cat <<'EOF'\n$(x)\nEOF\n", "f() { g; }; f", "[[ -f x ]] && ((y))", "echo ${a:-$(b)}",
		"$'\\x41' \"$@\" ${!x}", "case $a in (x) y;; esac", "for i in {1..3}; do :; done"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		l := SplitShell(src)
		for _, c := range l.Commands {
			if len(c.Words) == 0 || c.Words[0] == "" || strings.ContainsRune(c.Words[0], hole) {
				t.Fatalf("%q: a command without a plain name: %q", src, c.Words)
			}
			for _, w := range c.Words {
				if strings.ContainsRune(w, sep) {
					t.Fatalf("%q: a word holds the separator", src)
				}
			}
		}
		// Splitting is deterministic.
		if again := SplitShell(src); !slices.Equal(commandsOf(again), commandsOf(l)) || again.Opaque != l.Opaque {
			t.Fatalf("%q: two splits differ", src)
		}
	})
}
