package routing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Policy is a parsed routing.yaml.
//
//	default: anthropic:claude-sonnet-4-6   # "" or absent: the session's model
//	rules:                                 # first match wins
//	  - name: quick
//	    when: {max_chars: 200}
//	    model: anthropic:claude-haiku-4-5
//	  - name: deep
//	    when: {keywords: [architecture, refactor]}
//	    model: anthropic:claude-opus-4-6
//	  - name: work-repo
//	    when: {workspace: "/home/me/work/*"}
//	    model: openai:gpt-4.1
//	workers:                               # the same shape, for delegated workers
//	  default: anthropic:claude-haiku-4-5
//	  rules: []
//
// A rule's `when` may combine conditions; all must hold. A turn whose
// message starts with "/model PROVIDER:MODEL" runs on that model whatever
// the policy says (reason "slash_command").
type Policy struct {
	Default string   `yaml:"default"`
	Rules   []Rule   `yaml:"rules"`
	Workers *RuleSet `yaml:"workers"`
}

// RuleSet is a default and ordered rules.
type RuleSet struct {
	Default string `yaml:"default"`
	Rules   []Rule `yaml:"rules"`
}

// Rule routes matching turns to Model.
type Rule struct {
	Name  string `yaml:"name"`
	When  When   `yaml:"when"`
	Model string `yaml:"model"`
}

// When holds a rule's conditions; unset ones always hold.
type When struct {
	MinChars  int      `yaml:"min_chars"`  // message at least this long (characters)
	MaxChars  int      `yaml:"max_chars"`  // message at most this long
	Keywords  []string `yaml:"keywords"`   // any of these words, case-insensitive
	Workspace string   `yaml:"workspace"`  // the workspace path matches this glob; a trailing * also matches nested paths
	Session   string   `yaml:"session_id"` // exactly this session
}

// ParsePolicy parses and validates routing.yaml.
func ParsePolicy(b []byte) (*Policy, error) {
	var p Policy
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("routing policy: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("routing policy: more than one YAML document (a stray \"---\"?); keep one")
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("routing policy: %w", err)
	}
	return &p, nil
}

func (p *Policy) validate() error {
	if err := validSet("", p.Default, p.Rules); err != nil {
		return err
	}
	if p.Workers != nil {
		if err := validSet("workers.", p.Workers.Default, p.Workers.Rules); err != nil {
			return err
		}
	}
	return nil
}

func validSet(prefix, def string, rules []Rule) error {
	if def != "" && !validModelID(def) {
		return fmt.Errorf("%sdefault %q: want provider:model", prefix, def)
	}
	names := map[string]bool{}
	for i, r := range rules {
		where := fmt.Sprintf("%srules[%d]", prefix, i)
		if r.Name == "" {
			return fmt.Errorf("%s: every rule needs a name (it is the reason route.decided reports)", where)
		}
		if names[r.Name] {
			return fmt.Errorf("%s: rule name %q is used twice", where, r.Name)
		}
		names[r.Name] = true
		if !validModelID(r.Model) {
			return fmt.Errorf("%s (%s): model %q: want provider:model", where, r.Name, r.Model)
		}
		w := r.When
		if w.MinChars < 0 || w.MaxChars < 0 || (w.MaxChars > 0 && w.MinChars > w.MaxChars) {
			return fmt.Errorf("%s (%s): min_chars/max_chars must be non-negative and min <= max", where, r.Name)
		}
		if w.Workspace != "" {
			if _, err := path.Match(w.Workspace, "/"); err != nil {
				return fmt.Errorf("%s (%s): workspace glob %q: %v", where, r.Name, w.Workspace, err)
			}
		}
		for _, k := range w.Keywords {
			if strings.TrimSpace(k) == "" {
				return fmt.Errorf("%s (%s): empty keyword", where, r.Name)
			}
		}
	}
	return nil
}

func validModelID(id string) bool {
	p, m, ok := strings.Cut(id, ":")
	return ok && p != "" && m != "" && strings.IndexFunc(id, unicode.IsSpace) < 0
}

// match reports whether every condition of w holds for in.
func (w *When) match(in Input) bool {
	n := len([]rune(in.UserText))
	if w.MinChars > 0 && n < w.MinChars {
		return false
	}
	if w.MaxChars > 0 && n > w.MaxChars {
		return false
	}
	if w.Session != "" && w.Session != in.SessionID {
		return false
	}
	if w.Workspace != "" {
		if ok, _ := path.Match(w.Workspace, in.Workspace); !ok && !strings.HasPrefix(in.Workspace, strings.TrimSuffix(w.Workspace, "*")) {
			return false
		}
	}
	if len(w.Keywords) > 0 {
		words := map[string]bool{}
		for _, f := range strings.FieldsFunc(strings.ToLower(in.UserText), func(r rune) bool {
			return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127)
		}) {
			words[f] = true
		}
		found := false
		for _, k := range w.Keywords {
			if words[strings.ToLower(strings.TrimSpace(k))] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// decide applies the policy to in.
func (p *Policy) decide(in Input) (model, reason string) {
	def, rules := p.Default, p.Rules
	if in.Worker && p.Workers != nil {
		def, rules = p.Workers.Default, p.Workers.Rules
	}
	for _, r := range rules {
		if r.When.match(in) {
			return r.Model, "rule:" + r.Name
		}
	}
	if def != "" {
		return def, "default"
	}
	return in.SessionModel, "session_model"
}
