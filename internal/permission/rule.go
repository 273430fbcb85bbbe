package permission

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/tool"
)

// Action is what a rule, or the policy, does with a call.
type Action string

// Actions, from the strictest. Deny beats ask beats allow.
const (
	Deny  Action = "deny"
	Ask   Action = "ask"
	Allow Action = "allow"
)

// Rule limits.
const (
	maxRuleBytes     = 4096
	maxToolNameBytes = 255
)

// Rule is one permission rule: TOOL or TOOL(PATTERN) with an action.
//
// TOOL is a tool name, where '*' stands for any run of characters
// (mcp__github__*); the names read, edit and fetch also stand for every
// tool of that kind (read_file, list_dir, … / write_file, … /
// web_fetch). PATTERN, when given, narrows the rule to calls whose
// input it matches, read by what the tool does:
//
//   - shell: a command pattern, matched against each simple command of
//     the line: words separated by spaces, '*' standing for anything
//     (other words included). "git status*" matches "git status" and
//     "git status --short" (and "git statusx"); "git status *" needs a
//     word boundary but also matches "git status" alone; "npm test"
//     matches only "npm test". "git status:*" is "git status *".
//   - file tools: a path glob relative to the workspace ("docs/**",
//     "*.md" at the top only, "**/*.go" at any depth).
//   - fetch tools: "domain:example.com" (that host; "domain:*.example.com"
//     its subdomains) or a glob over the whole URL.
//   - any other tool: a glob over each of its targets.
type Rule struct {
	Action Action
	// Text is the rule as written (trimmed): what the summary and the
	// events show, and what a session rule is stored as.
	Text    string
	tool    string // glob over tool names
	pattern string // "" when the rule names the whole tool
	shell   string // pattern as a shell command glob (see shellPattern)
	// alias is the kind the tool name stands for (read, edit, fetch), ""
	// for none; literal reports a tool name without '*'. Both are set
	// at parse time, so that the rules a call does not concern cost a
	// string comparison each.
	alias   tool.Kind
	literal bool
}

// String returns the rule as written.
func (r Rule) String() string { return r.Text }

// Whole reports whether the rule covers every call of its tool, whatever
// the input.
func (r Rule) Whole() bool { return r.pattern == "" }

// ErrRule is wrapped by every error of ParseRule.
var ErrRule = errors.New("invalid permission rule")

// ParseRule parses one rule (see Rule) with its action.
func ParseRule(action Action, s string) (Rule, error) {
	fail := func(format string, args ...any) (Rule, error) {
		return Rule{}, fmt.Errorf("%w %q (%s): %s", ErrRule, s, action, fmt.Sprintf(format, args...))
	}
	switch action {
	case Allow, Ask, Deny:
	default:
		return fail("unknown action")
	}
	text := strings.TrimSpace(s)
	if text == "" {
		return fail("empty")
	}
	if len(text) > maxRuleBytes {
		return fail("longer than %d bytes", maxRuleBytes)
	}
	if !utf8.ValidString(text) {
		return fail("not valid UTF-8")
	}
	for _, r := range text {
		if r < 0x20 || r == 0x7f {
			return fail("holds a control character")
		}
	}
	name, pattern, hasPattern := strings.Cut(text, "(")
	name = strings.TrimSpace(name)
	if hasPattern {
		if !strings.HasSuffix(pattern, ")") {
			return fail(`a pattern must end with ")"`)
		}
		pattern = strings.TrimSpace(strings.TrimSuffix(pattern, ")"))
		if pattern == "" {
			return fail("an empty pattern (write %s alone for the whole tool)", name)
		}
	}
	if name == "" {
		return fail("no tool name")
	}
	if len(name) > maxToolNameBytes {
		return fail("the tool name is longer than %d bytes", maxToolNameBytes)
	}
	for _, c := range name {
		if !(c == '_' || c == '-' || c == '.' || c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return fail("the tool name may hold letters, digits, '_', '-', '.' and '*' only")
		}
	}
	r := Rule{Action: action, Text: text, tool: name, pattern: pattern, alias: aliases[name], literal: !strings.Contains(name, "*")}
	if hasPattern {
		if err := checkPattern(name, pattern); err != nil {
			return fail("%v", err)
		}
		r.shell = shellPattern(pattern)
	}
	return r, nil
}

// The tools whose patterns ParseRule checks by their syntax: the
// built-in ones and the kind names. A pattern for any other tool is
// taken as it is (a glob over its targets).
var (
	pathTools = map[string]bool{"read_file": true, "write_file": true, "list_dir": true, "edit_file": true,
		"apply_patch": true, "glob": true, "grep": true, "read": true, "edit": true}
	urlTools = map[string]bool{"web_fetch": true, "fetch": true}
)

func checkPattern(tool, pattern string) error {
	switch {
	case tool == "shell":
		if strings.Trim(pattern, " *:") == "" {
			return errors.New(`a command pattern needs a word (write "shell" alone for every command)`)
		}
	case pathTools[tool]:
		return checkPathPattern(pattern)
	case urlTools[tool]:
		if host, ok := strings.CutPrefix(pattern, "domain:"); ok {
			return checkHost(host)
		}
		if !strings.Contains(pattern, "*") {
			if _, err := url.Parse(pattern); err != nil {
				return fmt.Errorf("not a URL or a domain:HOST: %v", err)
			}
		}
	}
	return nil
}

func checkPathPattern(p string) error {
	if strings.HasPrefix(p, "/") {
		return errors.New("a path pattern is relative to the workspace; drop the leading /")
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".":
			return errors.New(`a path pattern has no empty or "." parts`)
		case "..":
			return errors.New(`a path pattern stays inside the workspace: no ".."`)
		case "**":
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("bad glob %q: %v", seg, err)
		}
	}
	return nil
}

func checkHost(h string) error {
	if h == "" {
		return errors.New("domain: needs a host name")
	}
	for _, c := range h {
		if !(c == '.' || c == '-' || c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return fmt.Errorf("%q is not a host name", h)
		}
	}
	return nil
}

// shellPattern turns a command pattern into a glob over a command's
// words (joined by sep): runs of spaces become one separator, and a
// trailing ":*" is read as " *".
func shellPattern(p string) string {
	if strings.HasSuffix(p, ":*") {
		p = strings.TrimSuffix(p, ":*") + " *"
	}
	return strings.Join(strings.Fields(p), string(sep))
}

// Rules is a set of rules by action: the rules of config.yaml.
type Rules struct {
	Deny, Ask, Allow []Rule
}

// ParseRules parses config.yaml's permissions lists. The first rule that
// does not parse is an error naming it (and the server refuses to
// start).
func ParseRules(allow, ask, deny []string) (Rules, error) {
	var rs Rules
	for _, l := range []struct {
		action Action
		in     []string
		out    *[]Rule
	}{{Deny, deny, &rs.Deny}, {Ask, ask, &rs.Ask}, {Allow, allow, &rs.Allow}} {
		for _, s := range l.in {
			r, err := ParseRule(l.action, s)
			if err != nil {
				return Rules{}, err
			}
			*l.out = append(*l.out, r)
		}
	}
	return rs, nil
}

// ParseAllowRules parses stored session rules (allow rules); one that
// no longer parses is skipped and reported in the error.
func ParseAllowRules(texts []string) ([]Rule, error) {
	out := make([]Rule, 0, len(texts))
	var errs []error
	for _, s := range texts {
		r, err := ParseRule(Allow, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}
