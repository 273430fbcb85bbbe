package permission

import (
	"encoding/json"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/tool"
)

// allowedCommands are commands the property tests' allow rules cover.
var allowedCommands = []string{"git status", "git diff --stat", "ls -la", "go test ./...", "echo ok", "cat README.md"}

// allowRules cover allowedCommands with prefix rules.
var allowRules = []string{"shell(git status*)", "shell(git diff *)", "shell(ls *)", "shell(go test *)", "shell(echo *)",
	"shell(cat *)"}

// deniedSpellings are ways to write the denied command, rm -rf x.
var deniedSpellings = []string{"rm -rf x", "'rm' -rf x", `"rm" -rf x`, `r\m -rf x`, "/bin/rm -rf x", "command rm -rf x",
	"env FOO=1 rm -rf x", "sudo rm -rf x", "timeout 5 rm -rf x", "nice -n 5 rm -rf x", "xargs rm -rf x", "exec rm -rf x"}

// composition draws a shell line that runs the denied command somewhere
// among allowed ones, through the shell's ways of combining commands.
func composition(t *rapid.T, depth int) string {
	if depth == 0 || rapid.IntRange(0, 3).Draw(t, "leaf") == 0 {
		return rapid.SampledFrom(deniedSpellings).Draw(t, "denied")
	}
	inner := composition(t, depth-1)
	ok := rapid.SampledFrom(allowedCommands).Draw(t, "allowed")
	quote := func(s string) string {
		q, err := syntax.Quote(s, syntax.LangBash)
		if err != nil {
			return "'x'"
		}
		return q
	}
	backticks := "echo `" + inner + "`"
	if strings.Contains(inner, "`") {
		backticks = "echo $(" + inner + ")" // backticks do not nest
	}
	forms := []string{
		ok + " && " + inner, inner + " && " + ok, ok + " || " + inner, ok + "; " + inner, ok + " | " + inner,
		inner + " | " + ok, ok + " & " + inner, "(" + inner + ")", "{ " + inner + "; }", "echo $(" + inner + ")",
		backticks, "cat <(" + inner + ")", "if " + ok + "; then " + inner + "; fi",
		"while " + inner + "; do " + ok + "; done", "f() { " + inner + "; }; f", "sh -c " + quote(inner),
		"bash -lc " + quote(inner), "eval " + quote(inner), "! " + inner, "time " + inner,
		"cat <<EOF\n$(" + inner + ")\nEOF", "X=$(" + inner + ") " + ok, ok + " > /dev/null; " + inner,
		"for i in 1 2; do " + inner + "; done", "case a in a) " + inner + ";; esac", ok + "\n" + inner,
	}
	return rapid.SampledFrom(forms).Draw(t, "form")
}

// TestPropertyNoCompositionSmugglesADeniedCommand: whatever shell syntax
// combines allowed commands with a denied one, the line is never
// allowed, in any mode and with any sandbox state: a deny rule refuses
// it, or asks where part of the line cannot be judged. Without the deny
// rule, the allow rules alone never allow it either.
func TestPropertyNoCompositionSmugglesADeniedCommand(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		line := composition(t, 3)
		mode := rapid.SampledFrom(Modes()).Draw(t, "mode")
		sandbox := rapid.SampledFrom([]Sandbox{SandboxEnforced, SandboxDisabled, SandboxUnavailable}).Draw(t, "sandbox")
		withDeny := policy(t, allowRules, nil, []string{"shell(rm *)"})
		withDeny.SetSandbox(sandbox)
		if v := withDeny.Decide(mode, nil, shellCall(line)); v.Action == Allow {
			t.Fatalf("%q in %s: allowed (%s)", line, mode, v.Reason)
		}
		allowOnly := policy(t, allowRules, nil, nil)
		allowOnly.SetSandbox(sandbox)
		if v := allowOnly.Decide(ModeDefault, nil, shellCall(line)); v.Action == Allow {
			t.Fatalf("%q: allowed by a prefix rule (%s)", line, v.Reason)
		}
		// A session rule for the allowed commands does not help either.
		sess, _ := ParseAllowRules(allowRules)
		if v := allowOnly.Decide(ModeDefault, sess, shellCall(line)); v.Action == Allow {
			t.Fatalf("%q: allowed by a session rule (%s)", line, v.Reason)
		}
	})
}

// TestPropertyAllowedCompositionsRun: the converse, so the property
// above is not met by refusing everything: lines made of allowed
// commands only are allowed.
func TestPropertyAllowedCompositionsRun(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(t, "n")
		var parts []string
		for range n {
			parts = append(parts, rapid.SampledFrom(allowedCommands).Draw(t, "cmd"))
		}
		op := rapid.SampledFrom([]string{" && ", "; ", " | ", " || ", "\n"}).Draw(t, "op")
		line := strings.Join(parts, op)
		if rapid.Bool().Draw(t, "subshell") {
			line = "(" + line + ")"
		}
		p := policy(t, allowRules, nil, []string{"shell(rm *)"})
		if v := p.Decide(ModeDefault, nil, shellCall(line)); v.Action != Allow {
			t.Fatalf("%q: %s (%s)", line, v.Action, v.Reason)
		}
	})
}

// TestPropertyDenyAlwaysWins: a call a deny rule matches is refused in
// every mode, whatever allow rules (configured or of the session) and
// ask rules say and whatever the sandbox.
func TestPropertyDenyAlwaysWins(t *testing.T) {
	type pick struct {
		call *Call
		deny []string // rules that match the call
	}
	rapid.Check(t, func(t *rapid.T) {
		calls := []func() pick{
			func() pick {
				return pick{shellCall("git push --force origin"), []string{"shell", "shell(git push*)", "shell(git *)", "*", "sh*"}}
			},
			func() pick {
				return pick{fileCall("write_file", tool.KindEdit, "docs/a.md"),
					[]string{"write_file", "write_file(docs/**)", "edit(docs/*.md)", "edit", "*", "write_*"}}
			},
			func() pick {
				return pick{fileCall("read_file", tool.KindRead, ".env"), []string{"read_file(.env)", "read(.env)", "read", "*"}}
			},
			func() pick {
				return pick{fetchCall("https://evil.example.com/x"),
					[]string{"web_fetch(domain:evil.example.com)", "fetch(domain:*.example.com)", "web_fetch(https://evil*)", "fetch"}}
			},
			func() pick {
				return pick{mcpCall("mcp__github__delete_repo"), []string{"mcp__github__*", "mcp__*__delete_*", "*"}}
			},
			func() pick {
				return pick{shellCall("echo x > .env"), []string{"edit(.env)", "write_file(.env)", "write_file"}}
			},
		}
		pk := rapid.SampledFrom(calls).Draw(t, "call")()
		deny := rapid.SampledFrom(pk.deny).Draw(t, "deny")
		others := []string{"*", pk.call.Tool, "shell(*x*)", "read", "edit", "fetch", "write_file(**)", "shell(git *)",
			"shell(echo *)", "edit(**)"}
		allow := rapid.SliceOfN(rapid.SampledFrom(others), 0, 4).Draw(t, "allow")
		ask := rapid.SliceOfN(rapid.SampledFrom(others), 0, 2).Draw(t, "ask")
		sessRules := rapid.SliceOfN(rapid.SampledFrom(others), 0, 4).Draw(t, "session")
		mode := rapid.SampledFrom(Modes()).Draw(t, "mode")
		p := policy(t, allow, ask, []string{deny})
		p.SetSandbox(rapid.SampledFrom([]Sandbox{SandboxUnknown, SandboxEnforced, SandboxDisabled, SandboxUnavailable}).Draw(t, "sandbox"))
		sess, err := ParseAllowRules(sessRules)
		if err != nil {
			t.Fatal(err)
		}
		fresh := *pk.call
		if v := p.Decide(mode, sess, &fresh); v.Action != Deny {
			t.Fatalf("%s %s in %s with deny %q: %s (%s)", pk.call.Tool, pk.call.Input, mode, deny, v.Action, v.Reason)
		}
	})
}

// shellInput is the input of a shell call, for benchmarks.
func shellInput(line string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"command": line})
	return b
}
