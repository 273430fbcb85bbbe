package routing

import (
	"strings"
	"testing"
	"unicode"

	"gopkg.in/yaml.v3"
)

var seedPolicies = []string{
	policyYAML,
	``,
	`# only a comment`,
	`default: builtin:demo`,
	`default: ""`,
	`rules: []`,
	`rules:`,
	`workers: {}`,
	`workers: null`,
	`workers: {default: builtin:demo, rules: [{name: w, model: "a:b", when: {keywords: [x]}}]}`,
	`rules: [{name: q, when: {min_chars: 3, max_chars: 3}, model: "a:b"}]`,
	`rules: [{name: g, when: {workspace: "/home/*/src/[a-z]*"}, model: "a:b"}]`,
	`rules: [{name: s, when: {session_id: sess_x}, model: "a:b"}]`,
	"rules:\n  - name: \"\\u00e9t\\u00e9\"\n    when: {keywords: [\"caf\\u00e9\", \"\\t x \"]}\n    model: \"p:m\\u00e9\"\n",
	// Refused ones.
	`default: nocolon`,
	`default: ":m"`,
	`default: "a:b c"`,
	`rules: [{name: "", model: "a:b"}]`,
	`rules: [{name: a, model: "a:b"}, {name: a, model: "c:d"}]`,
	`rules: [{name: a, model: "a:b", when: {min_chars: 5, max_chars: 2}}]`,
	`rules: [{name: a, model: "a:b", when: {max_chars: -1}}]`,
	`rules: [{name: a, model: "a:b", when: {workspace: "["}}]`,
	`rules: [{name: a, model: "a:b", when: {keywords: [" "]}}]`,
	`rules: [{name: a, model: "a:b", when: {unknown: 1}}]`,
	`rules: [{name: a, model: "a:b", when: {min_chars: 99999999999999999999}}]`,
	`defualt: a:b`,
	`workers: [1]`,
	`- a`,
	`{`,
	"default: a:b\n---\nrules: 5\n",
	"a: &x [*x]",
	"rules: &r [{name: a, model: \"a:b\"}]\nworkers: {rules: *r}",
	"<<: {default: \"a:b\"}",
	"default: !!binary YTpi",
	"\xff\xfe",
}

// FuzzParsePolicy: ParsePolicy never panics; a refusal is an error
// naming the routing policy; an accepted policy re-validates, survives
// a YAML round trip (the re-encoded file parses to a policy that encodes
// the same and routes the same), and routes every input to a rule's
// model, the default, or the session's model.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range seedPolicies {
		f.Add([]byte(s), "please refactor the architecture", "/home/me/work/x", false)
	}
	f.Add([]byte(policyYAML), "prove it", "/", true)
	f.Add([]byte(policyYAML), strings.Repeat("é", 150), "", false)
	f.Fuzz(func(t *testing.T, data []byte, text, workspace string, worker bool) {
		p, err := ParsePolicy(data)
		if err != nil {
			if p != nil || !strings.HasPrefix(err.Error(), "routing policy: ") {
				t.Fatalf("refused with %v and %+v", err, p)
			}
			return
		}
		if p == nil {
			t.Fatal("no policy and no error")
		}
		if err := p.validate(); err != nil {
			t.Fatalf("accepted policy does not validate: %v", err)
		}
		out, err := yaml.Marshal(p)
		if err != nil {
			t.Fatalf("marshal %+v: %v", p, err)
		}
		again, err := ParsePolicy(out)
		if err != nil {
			t.Fatalf("re-encoded policy refused: %v\n%s", err, out)
		}
		out2, err := yaml.Marshal(again)
		if err != nil || string(out2) != string(out) {
			t.Fatalf("round trip changed the policy:\n%s\n%s (%v)", out, out2, err)
		}

		in := Input{SessionID: "sess_x", SessionModel: "builtin:demo", Workspace: workspace, UserText: text, Worker: worker}
		m, reason := p.decide(in)
		m2, reason2 := again.decide(in)
		if m != m2 || reason != reason2 {
			t.Fatalf("round trip routes %+v differently: %s %s / %s %s", in, m, reason, m2, reason2)
		}
		def, rules := p.Default, p.Rules
		if worker && p.Workers != nil {
			def, rules = p.Workers.Default, p.Workers.Rules
		}
		switch {
		case reason == "default":
			if def == "" || m != def {
				t.Fatalf("default routes to %q (default %q)", m, def)
			}
		case reason == "session_model":
			if m != in.SessionModel || def != "" {
				t.Fatalf("session_model routes to %q with default %q", m, def)
			}
		case strings.HasPrefix(reason, "rule:"):
			found := false
			for _, r := range rules {
				if "rule:"+r.Name == reason {
					found = r.Model == m
					break
				}
			}
			if !found {
				t.Fatalf("reason %q routes to %q, not its rule's model", reason, m)
			}
		default:
			t.Fatalf("reason %q", reason)
		}
		if m != in.SessionModel && !validModelID(m) {
			t.Fatalf("routed to %q", m)
		}
	})
}

// FuzzParseCommand: ParseCommand never panics; a message that is not a
// command comes back whole; a command names a provider:model without
// whitespace that the message spells after "/model", and rest is the
// trimmed end of the message after it; rebuilding the command from its
// parts parses to the same parts.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		"/model openai:gpt-4.1 explain this",
		"  /model anthropic:claude-opus-4-6\nmulti\nline",
		"/model builtin:demo",
		"/model builtin:demo   ",
		"\t/model\tbuiltin:demo\thi",
		"/model builtin:demo\n\n  spaced  ",
		"/model builtin:demo\r\nhello",
		"/model\nbuiltin:demo hi",
		"/modelx openai:gpt-4.1 hi",
		"/model nonsense hi",
		"/model :x hi",
		"/model x: hi",
		"/model",
		"/model ",
		"use /model openai:gpt-4.1",
		"/MODEL a:b",
		"/model a:b\u00a0hi",
		"/model a:b\u2028hi",
		"/model a:b:c d",
		"/model \xff:\xfe x",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		model, rest, ok := ParseCommand(text)
		if !ok {
			if model != "" || rest != text {
				t.Fatalf("not a command, yet %q %q", model, rest)
			}
			return
		}
		if !validModelID(model) || strings.IndexFunc(model, unicode.IsSpace) >= 0 {
			t.Fatalf("model %q", model)
		}
		cmd := strings.TrimLeft(text, " \t")
		after, found := strings.CutPrefix(cmd, "/model")
		if !found || after == "" || !unicode.IsSpace(rune(after[0])) {
			t.Fatalf("%q is not a /model command", text)
		}
		at := strings.Index(after, model)
		if at < 0 || strings.TrimSpace(after[:at]) != "" {
			t.Fatalf("model %q is not the word after /model in %q", model, text)
		}
		tail := after[at+len(model):]
		if tail != "" && !startsWithSpace(tail) {
			t.Fatalf("model %q is cut out of a longer word in %q", model, text)
		}
		if rest != strings.TrimSpace(tail) {
			t.Fatalf("rest %q, want %q", rest, strings.TrimSpace(tail))
		}
		m2, r2, ok2 := ParseCommand("/model " + model + " " + rest)
		if !ok2 || m2 != model || r2 != rest {
			t.Fatalf("rebuilt command parses to %q %q %v, want %q %q", m2, r2, ok2, model, rest)
		}
	})
}

func startsWithSpace(s string) bool {
	for _, r := range s {
		return unicode.IsSpace(r)
	}
	return false
}
