package permission

import (
	"fmt"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// fiftyRules is a plausible config.yaml: 50 rules over the shell, files
// and fetches.
func fiftyRules(b *testing.B) *Policy {
	var allow, ask, deny []string
	for _, c := range []string{"git status", "git diff", "git log", "git show", "go test", "go vet", "go build",
		"npm test", "npm run lint", "npm run build", "ls", "cat", "head", "tail", "wc", "grep", "rg", "find",
		"echo", "pwd", "make test", "make lint", "cargo test", "cargo build", "python -m pytest"} {
		allow = append(allow, "shell("+c+" *)")
	}
	for i := range 10 {
		allow = append(allow, fmt.Sprintf("write_file(pkg%d/**)", i))
	}
	ask = append(ask, "shell(git push *)", "shell(npm publish *)", "shell(docker *)", "web_fetch(domain:*.internal)",
		"shell(kubectl *)")
	deny = append(deny, "shell(rm -rf *)", "shell(sudo *)", "shell(curl * | sh)", "write_file(.env)",
		"read_file(.env)", "shell(git push --force*)", "edit(.git/**)", "shell(dd *)", "shell(mkfs*)", "mcp__*__delete_*")
	if n := len(allow) + len(ask) + len(deny); n != 50 {
		b.Fatalf("%d rules", n)
	}
	p, err := ParseRules(allow, ask, deny)
	if err != nil {
		b.Fatal(err)
	}
	pol := NewPolicy(p)
	pol.SetSandbox(SandboxEnforced)
	return pol
}

// BenchmarkDecideCompoundShellLine: one decision on a typical compound
// shell line against 50 rules: parse, split, and match every command.
func BenchmarkDecideCompoundShellLine(b *testing.B) {
	p := fiftyRules(b)
	in := shellInput("cd web && npm ci && npm run build 2>&1 | tail -20 && git status --short && go test ./... > test.log")
	b.ReportAllocs()
	for b.Loop() {
		c := Call{Tool: "shell", Kind: tool.KindExecute, Input: in, Targeter: tool.Shell{}, Workspace: "/ws"}
		if v := p.Decide(ModeDefault, nil, &c); v.Action != Ask {
			b.Fatal(v)
		}
	}
}

// BenchmarkDecideReadNoRules: the hot path: a read in default mode that
// no rule names.
func BenchmarkDecideReadNoRules(b *testing.B) {
	p := fiftyRules(b)
	in := []byte(`{"path":"src/main.go"}`)
	b.ReportAllocs()
	for b.Loop() {
		c := Call{Tool: "list_dir", Kind: tool.KindRead, Input: in, Targeter: tool.ListDir{}}
		if v := p.Decide(ModeDefault, nil, &c); v.Action != Allow {
			b.Fatal(v)
		}
	}
}
