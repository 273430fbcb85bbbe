package permission

import (
	"net/url"
	"path"
	"strings"

	"github.com/metis-agent/metis/internal/tool"
)

// SessionRules returns the allow rules an "allow for this session"
// answer to the call adds: a generalisation of the call, shown to the
// user before they answer (approval.requested's session_rules). nil when
// the call cannot be generalised safely (a shell line that cannot be
// judged): such an answer then counts as once.
//
//   - shell: one rule per simple command, its first words followed by
//     " *" for commands whose leading words name a subcommand
//     ("git checkout *", "npm run build *", "go test *") or that only
//     read ("ls *", "cat *"), the exact command for any other ("rm
//     build/out.log"); and edit(PATH) for each file a redirection
//     writes.
//   - file tools: TOOL(DIR/**) for the directory of each path
//     (TOOL(PATH) for a file at the top of the workspace).
//   - fetch tools: TOOL(domain:HOST).
//   - any other tool: the tool's name, every call of it.
func SessionRules(c *Call) []string {
	var out []string
	add := func(r string) {
		for _, o := range out {
			if o == r {
				return
			}
		}
		out = append(out, r)
	}
	us := c.unitsOf()
	if c.Targeter == nil {
		return []string{c.Tool}
	}
	for _, u := range us {
		if u.opaque != "" {
			return nil
		}
		var r string
		switch {
		case u.style == styleShell:
			p, ok := commandPrefix(u.cmd)
			if !ok {
				return nil
			}
			r = c.Tool + "(" + p + ")"
		case u.tool == "write_file" && c.Kind == tool.KindExecute:
			if !safePattern(u.target) {
				return nil
			}
			r = "edit(" + u.target + ")"
		case u.style == stylePath:
			if !safePattern(u.target) {
				return nil
			}
			dir := path.Dir(u.target)
			if dir == "." {
				r = c.Tool + "(" + u.target + ")"
			} else {
				r = c.Tool + "(" + dir + "/**)"
			}
		case u.style == styleURL:
			h := hostOf(u.target)
			if h == "" || checkHost(h) != nil {
				return nil
			}
			r = c.Tool + "(domain:" + h + ")"
		default:
			return []string{c.Tool}
		}
		if _, err := ParseRule(Allow, r); err != nil {
			return nil
		}
		add(r)
	}
	return out
}

// arity is how many leading words name what a command does, for the
// commands whose first words name a subcommand (git checkout, npm run
// build); readOnly commands generalise after their name.
var (
	arity = map[string]int{"git": 2, "npm": 2, "pnpm": 2, "yarn": 2, "bun": 2, "go": 2, "cargo": 2, "docker": 2,
		"kubectl": 2, "pip": 2, "pip3": 2, "poetry": 2, "uv": 2, "gh": 2, "make": 2, "terraform": 2, "helm": 2,
		"dotnet": 2, "mvn": 2, "gradle": 2, "deno": 2, "rustup": 2, "brew": 2, "just": 2, "task": 2,
		"npm run": 3, "pnpm run": 3, "yarn run": 3, "bun run": 3, "docker compose": 3, "gh pr": 3, "gh issue": 3,
		"go mod": 3, "uv pip": 3, "git stash": 3, "git remote": 3, "cargo +nightly": 3}
	readOnly = map[string]bool{"ls": true, "cat": true, "head": true, "tail": true, "wc": true, "grep": true,
		"rg": true, "echo": true, "pwd": true, "which": true, "file": true, "stat": true, "tree": true, "du": true,
		"df": true, "sort": true, "uniq": true, "diff": true, "true": true, "false": true, "date": true}
)

// commandPrefix returns the pattern a session rule uses for a command
// (see SessionRules), false when its words cannot be written as one.
func commandPrefix(c Command) (string, bool) {
	for _, w := range c.Words {
		if !safeWord(w) {
			return "", false
		}
	}
	n := 0
	if len(c.Words) >= 2 {
		n = arity[c.Words[0]+" "+c.Words[1]]
	}
	if n == 0 {
		n = arity[c.Words[0]]
	}
	if n == 0 && readOnly[c.Words[0]] {
		n = 1
	}
	if n == 0 || n > len(c.Words) {
		return strings.Join(c.Words, " "), true // the exact command
	}
	for _, w := range c.Words[1:n] {
		if strings.HasPrefix(w, "-") {
			return strings.Join(c.Words, " "), true // an option where a subcommand should be
		}
	}
	return strings.Join(c.Words[:n], " ") + " *", true
}

// safeWord reports whether a command word can stand in a pattern as
// itself: no hole, no space, no '*' and nothing ParseRule refuses.
func safeWord(w string) bool {
	return w != "" && !strings.ContainsAny(w, " \t*()"+string(hole)+string(sep)) && safePattern(w)
}

// safePattern reports whether s can stand in a rule's pattern as itself.
func safePattern(s string) bool {
	if s == "" || strings.ContainsAny(s, "*?[]\\()") {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}
