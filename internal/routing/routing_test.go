package routing

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const policyYAML = `
default: anthropic:claude-sonnet-4-6
rules:
  - name: quick
    when: {max_chars: 20}
    model: anthropic:claude-haiku-4-5
  - name: deep
    when: {keywords: [architecture, Refactor]}
    model: anthropic:claude-opus-4-6
  - name: work
    when: {workspace: "/home/me/work/*"}
    model: openai:gpt-4.1
  - name: long-in-one-session
    when: {min_chars: 100, session_id: sess_special}
    model: openai:gpt-5
workers:
  default: builtin:demo
  rules:
    - name: worker-deep
      when: {keywords: [prove]}
      model: anthropic:claude-opus-4-6
`

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEveryRuleKind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "routing.yaml")
	write(t, path, policyYAML)
	e, err := NewEngine(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x ", 60)
	cases := []struct {
		in         Input
		model, rsn string
	}{
		{Input{UserText: "hi"}, "anthropic:claude-haiku-4-5", "rule:quick"},
		{Input{UserText: "please refactor the storage layer for me"}, "anthropic:claude-opus-4-6", "rule:deep"},
		{Input{UserText: "what about the ARCHITECTURE, in depth?"}, "anthropic:claude-opus-4-6", "rule:deep"},
		{Input{UserText: "architectures are not the keyword here", Workspace: "/tmp/x"}, "anthropic:claude-sonnet-4-6", "default"},
		{Input{UserText: "look at this repository please", Workspace: "/home/me/work/metis"}, "openai:gpt-4.1", "rule:work"},
		{Input{UserText: "nested workspace path here please", Workspace: "/home/me/work/a/b"}, "openai:gpt-4.1", "rule:work"},
		{Input{UserText: long, SessionID: "sess_special"}, "openai:gpt-5", "rule:long-in-one-session"},
		{Input{UserText: long, SessionID: "sess_other"}, "anthropic:claude-sonnet-4-6", "default"},
		{Input{UserText: "hi", Worker: true}, "builtin:demo", "default"},
		{Input{UserText: "prove it", Worker: true}, "anthropic:claude-opus-4-6", "rule:worker-deep"},
		{Input{UserText: "hi", Override: "openai:gpt-4o"}, "openai:gpt-4o", "slash_command"},
	}
	for _, c := range cases {
		d := e.Decide(c.in)
		if d.Model != c.model || d.Reason != c.rsn || d.PolicyVersion != e.Version() {
			t.Errorf("%+v: got %+v, want %s %s", c.in, d, c.model, c.rsn)
		}
	}
}

func TestNoFileRoutesToSessionModel(t *testing.T) {
	e, err := NewEngine(filepath.Join(t.TempDir(), "absent.yaml"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := e.Decide(Input{SessionModel: "builtin:demo", UserText: "x"}); d.Model != "builtin:demo" || d.Reason != "session_model" {
		t.Fatalf("%+v", d)
	}
}

func TestReloadVersionAndBrokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "routing.yaml")
	write(t, path, "default: builtin:demo\n")
	var mu sync.Mutex
	var changes []Change
	e, err := NewEngine(path, nil, func(c Change) { mu.Lock(); changes = append(changes, c); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	v0 := e.Version()

	// Same policy, different bytes: no new version.
	write(t, path, "# a comment\ndefault: builtin:demo\n")
	if changed, err := e.Reload(); changed || err != nil || e.Version() != v0 {
		t.Fatalf("comment-only change: changed=%v err=%v version %s→%s", changed, err, v0, e.Version())
	}
	// A real change: new version, new decisions.
	write(t, path, "default: openai:gpt-4.1\n")
	if changed, err := e.Reload(); !changed || err != nil || e.Version() <= v0 {
		t.Fatalf("change: changed=%v err=%v version %s→%s", changed, err, v0, e.Version())
	}
	v1 := e.Version()
	if d := e.Decide(Input{UserText: "x"}); d.Model != "openai:gpt-4.1" || d.PolicyVersion != v1 {
		t.Fatalf("%+v", d)
	}
	// A broken file keeps the previous policy and version, reported once.
	for _, bad := range []string{"default: [oops", "rules:\n  - model: x:y\n", "default: nocolon\n", "rulez: []\n", "default: a:b\n---\ndefault: c:d\n"} {
		write(t, path, bad)
		if _, err := e.Reload(); err == nil {
			t.Fatalf("%q accepted", bad)
		}
		if _, err := e.Reload(); err != nil {
			t.Fatalf("%q reported twice", bad)
		}
		if e.Version() != v1 || e.Decide(Input{UserText: "x"}).Model != "openai:gpt-4.1" {
			t.Fatalf("%q replaced the policy", bad)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 6 || changes[0].Err != nil || changes[0].Version != v1 || changes[1].Err == nil {
		t.Fatalf("changes %+v", changes)
	}
	if _, err := NewEngine(path, nil, nil); err == nil {
		t.Fatal("a broken file at start was accepted")
	}
}

func TestParseCommand(t *testing.T) {
	cases := []struct {
		in, model, rest string
		ok              bool
	}{
		{"/model openai:gpt-4.1 explain this", "openai:gpt-4.1", "explain this", true},
		{"  /model anthropic:claude-opus-4-6\nmulti\nline", "anthropic:claude-opus-4-6", "multi\nline", true},
		{"/model builtin:demo", "builtin:demo", "", true},
		{"/modelx openai:gpt-4.1 hi", "", "/modelx openai:gpt-4.1 hi", false},
		{"/model nonsense hi", "", "/model nonsense hi", false},
		{"use /model openai:gpt-4.1", "", "use /model openai:gpt-4.1", false},
	}
	for _, c := range cases {
		m, r, ok := ParseCommand(c.in)
		if m != c.model || r != c.rest || ok != c.ok {
			t.Errorf("%q: %q %q %v", c.in, m, r, ok)
		}
	}
}
