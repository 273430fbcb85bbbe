package permission

import (
	"errors"
	"strings"
	"testing"
)

// TestParseRule: the rule syntax, and what it refuses with the rule
// named.
func TestParseRule(t *testing.T) {
	for _, ok := range []string{"shell", "shell(git status*)", "shell(git status:*)", "write_file(docs/**)",
		"read(**/*.go)", "edit(src/*.ts)", "web_fetch(domain:example.com)", "web_fetch(domain:*.example.com)",
		"web_fetch(https://example.com/*)", "mcp__github__*", "*", " shell( npm test ) ", "shell(echo (x))"} {
		if _, err := ParseRule(Allow, ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "shell(", "shell()", "shell(git status", "(x)", "sh ell", "shell(\x00)",
		"write_file(/etc/passwd)", "write_file(../x)", "write_file(a//b)", "read([)", "web_fetch(domain:)",
		"web_fetch(domain:ex ample.com)", "shell(*)", "shell( : * )", strings.Repeat("x", 5000), "read_file(a\nb)"} {
		_, err := ParseRule(Deny, bad)
		if !errors.Is(err, ErrRule) {
			t.Errorf("%q: accepted (%v)", bad, err)
			continue
		}
		if !strings.Contains(err.Error(), "(deny)") {
			t.Errorf("%q: the error does not name the rule and its list: %v", bad, err)
		}
	}
	if _, err := ParseRules([]string{"shell(ok)"}, nil, []string{"shell("}); err == nil || !strings.Contains(err.Error(), `"shell("`) {
		t.Fatalf("ParseRules: %v", err)
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"shell(git status*)", "write_file(docs/**)", "web_fetch(domain:example.com)",
		"mcp__x__*", "read([a-z]*)", "shell(a:*)", "edit(**)", "x(y(z))"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(Allow, s)
		if err != nil {
			if !errors.Is(err, ErrRule) {
				t.Fatalf("%q: an error without ErrRule: %v", s, err)
			}
			return
		}
		// A parsed rule parses again to itself, and matches without
		// panicking.
		again, err := ParseRule(Allow, r.Text)
		if err != nil || again.Text != r.Text || again.tool != r.tool || again.pattern != r.pattern {
			t.Fatalf("%q: does not round-trip: %v", s, err)
		}
		for _, c := range []*Call{shellCall("git status && rm x"), fileCall("write_file", "edit", "docs/a.md"),
			fetchCall("https://example.com/"), mcpCall("mcp__x__y")} {
			_ = c.matchAny(&r)
			_ = c.allowedBy(ModeDefault, []Rule{r})
		}
	})
}
