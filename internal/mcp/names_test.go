package mcp

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// providerName is what Anthropic accepts as a tool name (OpenAI's
// function names: the same characters, the same length).
var providerName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolNames(t *testing.T) {
	for _, c := range []struct{ server, tool, want string }{
		{"github", "create_issue", "mcp__github__create_issue"},
		{"fs", "read.file", "mcp__fs__read_file"},
		{"fs", "a/b c", "mcp__fs__a_b_c"},
		{"fs", "données", "mcp__fs__donn_es"},
		{"x", strings.Repeat("a", 80), "mcp__x__" + strings.Repeat("a", 47) + hashSuffix("x", strings.Repeat("a", 80))},
	} {
		if got := ToolName(c.server, c.tool); got != c.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
		}
	}
}

func TestCollidingToolNamesAreResolvedInOrder(t *testing.T) {
	got := assignNames("s", []string{"a.b", "a_b", "a b"})
	if got[0] != "mcp__s__a_b" {
		t.Fatalf("the first keeps the name: %v", got)
	}
	for i, n := range got[1:] {
		if want := "mcp__s__a_b" + hashSuffix("s", []string{"a_b", "a b"}[i]); n != want {
			t.Errorf("collision %d: %q, want %q", i+1, n, want)
		}
	}
	// Long names that share their first 55 bytes differ by their hash.
	long := strings.Repeat("x", 70)
	l := assignNames("s", []string{long + "1", long + "2"})
	if l[0] == l[1] || len(l[0]) != MaxToolName || len(l[1]) != MaxToolName {
		t.Fatalf("long names: %v", l)
	}
}

// Property: whatever the server and tool names, every offered name is
// valid for every provider, the names of one server's tools are
// distinct, and the same list always gets the same names.
func TestOfferedNamesAreValidDistinctAndStable(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		server := rapid.StringMatching(`[A-Za-z0-9-]{1,32}`).Draw(rt, "server")
		tools := rapid.SliceOfDistinct(rapid.OneOf(
			rapid.String(),
			rapid.StringMatching(`[a-c._ /-]{0,6}`),
			rapid.StringMatching(`[a-z]{60,90}[0-9]`),
		), func(s string) string { return s }).Draw(rt, "tools")
		sort.Strings(tools)
		got := assignNames(server, tools)
		seen := map[string]bool{}
		for i, n := range got {
			if !providerName.MatchString(n) {
				rt.Fatalf("%q (tool %q) is not a valid tool name", n, tools[i])
			}
			if !strings.HasPrefix(n, Prefix+server+"__") && len(Prefix+server+"__") <= 55 {
				rt.Fatalf("%q does not start with its server's prefix", n)
			}
			if seen[n] {
				rt.Fatalf("%q is given twice: %v for %q", n, got, tools)
			}
			seen[n] = true
		}
		again := assignNames(server, tools)
		for i := range got {
			if got[i] != again[i] {
				rt.Fatalf("names differ between two runs: %v, %v", got, again)
			}
		}
	})
}

func TestSessionServerNames(t *testing.T) {
	for in, want := range map[string]string{
		"github":                              "github",
		"GitHub MCP":                          "GitHub_MCP",
		"  my__odd..name  ":                   "my_odd_name",
		"":                                    "server",
		"!!!":                                 "server",
		strings.Repeat("ab", 30):              strings.Repeat("ab", 16),
		"élan":                                "lan",
		"a_" + strings.Repeat("b", 29) + "_c": "a_" + strings.Repeat("b", 29),
	} {
		got := SessionServerName(in)
		if got != want {
			t.Errorf("SessionServerName(%q) = %q, want %q", in, got, want)
		}
		if checkConfigName(got) != nil {
			t.Errorf("SessionServerName(%q) = %q, not a valid server name: %v", in, got, checkConfigName(got))
		}
	}
	taken := map[string]bool{}
	if a, b := uniqueName("x", taken), uniqueName("x", taken); a != "x" || b != "x-2" {
		t.Fatalf("unique names: %q, %q", a, b)
	}
}
