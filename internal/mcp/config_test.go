package mcp

import (
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/protocol"
)

func env(vars map[string]string) Getenv {
	return func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
}

func TestParseConfig(t *testing.T) {
	p := ParseConfig([]byte(`
default-model: builtin:demo
mcp_servers:
  github:
    url: https://api.example.com/mcp/
    headers:
      Authorization: "Bearer ${GH}"
    trust_read_only_hints: true
    call_timeout: 30s
  fs:
    command: npx
    args: [-y, "@modelcontextprotocol/server-filesystem", /src]
    env: {DEBUG: "1", PRICE: "$$5 and $${X}"}
    cwd: /tmp
    enabled: false
    start_timeout: 1m
`), env(map[string]string{"GH": "tok"}))
	if p.Err != "" || len(p.Servers) != 2 {
		t.Fatalf("parsed: %+v", p)
	}
	fs, gh := p.Servers[0], p.Servers[1]
	if gh.Name != "github" || gh.Transport() != protocol.MCPTransportHTTP || gh.Headers["Authorization"] != "Bearer tok" ||
		!gh.TrustReadOnlyHints || gh.CallTimeout != 30*time.Second || gh.StartTimeout != DefaultStartTimeout || gh.Problem != "" {
		t.Errorf("github: %+v", gh)
	}
	if fs.Name != "fs" || fs.Transport() != protocol.MCPTransportStdio || !fs.Disabled || fs.Cwd != "/tmp" ||
		len(fs.Args) != 3 || fs.Env["PRICE"] != "$$5 and ${X}" || fs.StartTimeout != time.Minute || fs.Problem != "" {
		t.Errorf("fs: %+v", fs)
	}
}

func TestParseConfigProblems(t *testing.T) {
	for entry, want := range map[string]string{
		`{command: x, url: "http://h/"}`:           "not both",
		`{}`:                                       "set command",
		`{command: x, headers: {A: b}}`:            "headers are for url servers",
		`{url: "http://h/", env: {A: b}}`:          "a url server takes headers",
		`{url: "file:///x"}`:                       "not an http(s) URL",
		`{url: "http://h/", headers: {"A B": c}}`:  "not a header name",
		`{url: "http://h/", headers: {Accept: x}}`: "set by the transport",
		`{command: x, cwd: rel}`:                   "not an absolute path",
		`{command: x, env: {"1A": b}}`:             "not an environment variable name",
		`{command: x, env: {A: "${NOPE}"}}`:        "NOPE, which is not set",
		`{command: x, env: {A: "${bad name}"}}`:    "does not name an environment variable",
		`{command: x, env: {A: "${OPEN"}}`:         "unclosed",
		`{command: x, start_timeout: 0s}`:          "out of range",
		`{command: x, call_timeout: soon}`:         "call_timeout",
		`{command: x, enabled: maybe}`:             "bool",
		`{command: x, extra: 1}`:                   "extra",
		`[command, x]`:                             "want a mapping",
		`{command: " x"}`:                          "not a program name",
	} {
		p := ParseConfig([]byte("mcp_servers:\n  s: "+entry+"\n  ok: {command: x}\n"), env(nil))
		if p.Err != "" || len(p.Servers) != 2 {
			t.Errorf("%s: %+v", entry, p)
			continue
		}
		if p.Servers[1].Problem == "" || !strings.Contains(p.Servers[1].Problem, want) {
			t.Errorf("%s: problem %q, want it to say %q", entry, p.Servers[1].Problem, want)
		}
		if p.Servers[0].Name != "ok" || p.Servers[0].Problem != "" {
			t.Errorf("%s: the good entry next to it: %+v", entry, p.Servers[0])
		}
	}
	for name, want := range map[string]string{"a__b": "__", "_a": "start or end", "a.b": "letters", strings.Repeat("a", 33): "1 to 32"} {
		p := ParseConfig([]byte("mcp_servers:\n  \""+name+"\": {command: x}\n"), env(nil))
		if len(p.Servers) != 1 || !strings.Contains(p.Servers[0].Problem, want) {
			t.Errorf("name %q: %+v", name, p.Servers)
		}
	}
	for file, want := range map[string]string{
		"mcp_servers: [a]\n":                             "must be a mapping",
		"mcp_servers: {}\nmcp-servers: {}\n":             "set twice",
		"mcp_servers: {a: {command: x}\n":                "does not parse",
		"mcp_servers:\n  a: {command: x}\n  a: {url: y}": "",
	} {
		p := ParseConfig([]byte(file), env(nil))
		if want == "" {
			if len(p.Servers) != 1 || !strings.Contains(p.Servers[0].Problem+p.Err, "twice") && !strings.Contains(p.Err, "already defined") {
				t.Errorf("%q: %+v", file, p)
			}
			continue
		}
		if !strings.Contains(p.Err, want) {
			t.Errorf("%q: error %q, want it to say %q", file, p.Err, want)
		}
	}
	if p := ParseConfig([]byte("addr: x\n"), env(nil)); p.Err != "" || len(p.Servers) != 0 {
		t.Errorf("no section: %+v", p)
	}
}

// FuzzParseConfig: ParseConfig never panics on any config.yaml, and
// every server it returns is either valid, with exactly one transport,
// or carries its problem.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"mcp_servers:\n  a: {command: x}\n",
		"mcp_servers:\n  a: {url: \"http://h/\", headers: {A: \"${X}\"}}\n",
		"mcp_servers:\n  a: {command: x, url: y}\n",
		"mcp_servers: null\n", "mcp_servers: 5\n", "mcp_servers:\n  a: &x {command: *x}\n",
		"mcp_servers:\n  a: {command: x, env: {A: \"$${\"}}\n", "- a\n", "{", "\xff",
		"mcp_servers:\n  ? [a]\n  : {command: x}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := ParseConfig(b, env(map[string]string{"X": "v"}))
		names := map[string]bool{}
		for _, s := range p.Servers {
			if names[s.Name] {
				t.Fatalf("%q twice", s.Name)
			}
			names[s.Name] = true
			if s.Problem != "" {
				continue
			}
			if (s.Command == "") == (s.URL == "") || checkConfigName(s.Name) != nil || s.StartTimeout <= 0 || s.CallTimeout <= 0 {
				t.Fatalf("accepted %+v", s)
			}
		}
	})
}
