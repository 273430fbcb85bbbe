package permission

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/metis-agent/metis/internal/tool"
)

// Sandbox is what the policy knows of the kernel sandbox that confines
// shell commands (docs/sandbox.md).
type Sandbox int32

// Sandbox states. The zero value, SandboxUnknown, is treated as
// unavailable: until the server says a sandbox confines commands, the
// policy does not pretend one does.
const (
	SandboxUnknown Sandbox = iota
	// SandboxEnforced: every shell command runs confined.
	SandboxEnforced
	// SandboxUnavailable: this kernel cannot confine commands.
	SandboxUnavailable
	// SandboxDisabled: the user turned the sandbox off; the modes then
	// behave as if it confined commands (the user's loud choice).
	SandboxDisabled
)

func (s Sandbox) String() string {
	switch s {
	case SandboxEnforced:
		return "enforced"
	case SandboxUnavailable:
		return "unavailable"
	case SandboxDisabled:
		return "disabled"
	}
	return "unknown"
}

// confines reports whether the modes may let a command run without
// asking as far as the sandbox is concerned.
func (s Sandbox) confines() bool { return s == SandboxEnforced || s == SandboxDisabled }

// Policy decides tool calls: the rules of config.yaml, the sandbox's
// state, and, per call, the session's mode and "allow for this session"
// rules. It is safe for concurrent use.
type Policy struct {
	rules   Rules
	sandbox atomic.Int32
}

// NewPolicy returns a policy with the configured rules (ParseRules).
func NewPolicy(rules Rules) *Policy { return &Policy{rules: rules} }

// SetSandbox records the sandbox's state (wiring calls it once it knows).
func (p *Policy) SetSandbox(s Sandbox) { p.sandbox.Store(int32(s)) }

// Sandbox returns the sandbox's state as last set.
func (p *Policy) Sandbox() Sandbox { return Sandbox(p.sandbox.Load()) }

// Rules returns the configured rules.
func (p *Policy) Rules() Rules { return p.rules }

// Call is a tool call to decide.
type Call struct {
	Tool  string
	Kind  tool.Kind
	Input json.RawMessage
	// Targeter, if not nil, gives the targets the call's rules match on
	// (the tool's tool.Targeted).
	Targeter tool.Targeted
	// Workspace is the session's absolute workspace directory, against
	// which a shell redirection to an absolute path is judged.
	Workspace string

	units *[]unit // computed on first use
}

// Verdict is the policy's decision on a call.
type Verdict struct {
	Action Action
	// Reason says why, in a sentence the user and the model can read.
	Reason string
	// Rule is the rule that decided, as written with its action
	// ("deny: shell(rm *)"), "" when the mode did.
	Rule string
}

// Decide decides a call in a mode, with the session's allow rules.
//
// The order: a deny rule that matches refuses; plan mode refuses what
// changes files or runs commands; an ask rule that matches, or may
// match, asks; a call that a deny rule may match but that cannot be
// fully judged asks; a shell command with no sandbox asks unless an
// allow rule covers it; an allow rule (configured or of the session)
// that covers the whole call allows it; otherwise the mode decides.
// "May match" is where a call's input cannot be judged (a shell line
// that does not parse, a command name that is not plain text, a path
// the tool cannot say): such a call is never allowed by a rule, and it
// asks rather than slip past a deny rule. A call that would ask but
// whose tool refuses its target outright (a path that leaves the
// workspace or is absolute) is refused instead: it could only fail, and
// asking the user to approve it would only waste their attention.
func (p *Policy) Decide(mode Mode, session []Rule, c *Call) Verdict {
	v := p.decide(mode, session, c)
	if v.Action == Ask {
		if why := c.refusedByTool(); why != "" {
			return Verdict{Action: Deny, Reason: why}
		}
	}
	return v
}

func (p *Policy) decide(mode Mode, session []Rule, c *Call) Verdict {
	var maybeDeny *Rule
	for i := range p.rules.Deny {
		r := &p.rules.Deny[i]
		switch c.matchAny(r) {
		case yes:
			return Verdict{Action: Deny, Reason: "the rule " + label(r) + " refuses it", Rule: label(r)}
		case maybe:
			if maybeDeny == nil {
				maybeDeny = r
			}
		}
	}
	if Refuses(mode, c.Kind) {
		return Verdict{Action: Deny, Reason: fmt.Sprintf("the session is in plan mode, which does not run tools that %s", doing(c.Kind))}
	}
	for i := range p.rules.Ask {
		r := &p.rules.Ask[i]
		if c.matchAny(r) != no {
			return Verdict{Action: Ask, Reason: "the rule " + label(r) + " asks", Rule: label(r)}
		}
	}
	if maybeDeny != nil {
		return Verdict{Action: Ask, Reason: "it cannot be checked against the rule " + label(maybeDeny) + whyOpaque(c),
			Rule: label(maybeDeny)}
	}
	if allowedBy := c.allowedBy(mode, p.rules.Allow, session); allowedBy != "" {
		return Verdict{Action: Allow, Reason: "the rule " + allowedBy + " allows it", Rule: allowedBy}
	}
	if modeDefault(mode, c.Kind, c.Kind == tool.KindEdit && c.editsInside()) == Allow {
		if c.Kind == tool.KindExecute && !p.Sandbox().confines() {
			return Verdict{Action: Ask, Reason: "no sandbox confines shell commands on this system (" + p.Sandbox().String() + ")"}
		}
		return Verdict{Action: Allow, Reason: runsReason[mode]}
	}
	return Verdict{Action: Ask, Reason: "the " + string(mode) + " mode asks before running tools that " + doing(c.Kind) + whyOpaque(c)}
}

// runsReason is the reason of a call a mode runs (static: the hot path
// allocates nothing for it).
var runsReason = map[Mode]string{ModeDefault: "the default mode runs it", ModeAcceptEdits: "the accept_edits mode runs it",
	ModePlan: "the plan mode runs it", ModeAuto: "the auto mode runs it"}

func label(r *Rule) string { return string(r.Action) + ": " + r.Text }

// doing describes what tools of kind k do.
func doing(k tool.Kind) string {
	switch k {
	case tool.KindEdit:
		return "change files"
	case tool.KindExecute:
		return "run commands"
	case tool.KindFetch:
		return "fetch from the network"
	case tool.KindRead:
		return "read files"
	case tool.KindDelegate:
		return "start workers"
	}
	return "come from outside metis"
}

// refusedByTool returns why the call's tool refuses its input outright,
// "" when it does not.
func (c *Call) refusedByTool() string {
	for _, u := range c.unitsOf() {
		if u.refused != "" {
			return u.refused
		}
	}
	return ""
}

// whyOpaque explains, when the call's input could not be judged, why.
func whyOpaque(c *Call) string {
	for _, u := range c.unitsOf() {
		if u.opaque != "" {
			return " (" + u.opaque + ")"
		}
	}
	return ""
}

// match is how a rule meets a call: no, yes, or maybe (it may, but the
// call's input cannot be judged).
type match int

const (
	no match = iota
	maybe
	yes
)

// unit is one thing a call does that rules judge: a simple command of a
// shell line, a file a tool (or a redirection) changes or reads, a URL,
// another tool's target, or an input that cannot be judged.
type unit struct {
	tool   string    // the tool the unit is judged as (write_file for a redirection)
	kind   tool.Kind // its kind
	style  style     // how patterns read it
	target string    // the path, URL or target ("" for a command or an opaque unit)
	cmd    Command   // styleShell
	// subj is cmd's subject, cands the subjects of its candidates (for
	// deny and ask rules); computed once with the unit.
	subj   string
	cands  []string
	opaque string // why the unit cannot be judged ("" when it can)
	// refused is why the tool refuses the call's input outright (a
	// path leaving the workspace), "" when it does not.
	refused string
	// inside reports, for a file target, that it is a known path
	// inside the workspace.
	inside bool
}

type style int

const (
	styleGlob style = iota
	styleShell
	stylePath
	styleURL
)

// styleOf says how patterns read the targets of a tool of kind k.
func styleOf(k tool.Kind) style {
	switch k {
	case tool.KindExecute:
		return styleShell
	case tool.KindRead, tool.KindEdit:
		return stylePath
	case tool.KindFetch:
		return styleURL
	}
	return styleGlob
}

// unitsOf returns (computing once) what the call does, unit by unit.
func (c *Call) unitsOf() []unit {
	if c.units != nil {
		return *c.units
	}
	var us []unit
	opaque := func(why string) {
		us = append(us, unit{tool: c.Tool, kind: c.Kind, style: styleOf(c.Kind), opaque: why})
	}
	switch {
	case c.Targeter == nil:
		opaque("the tool does not say what it acts on")
	default:
		targets, err := c.Targeter.Targets(c.Input)
		switch {
		case err != nil && tool.ClassOf(err) == tool.ClassPermissionDenied:
			var te *tool.Error
			why := err.Error()
			if errors.As(err, &te) {
				why = te.Message
			}
			us = append(us, unit{tool: c.Tool, kind: c.Kind, style: styleOf(c.Kind), opaque: why, refused: why})
		case err != nil:
			opaque(err.Error())
		case len(targets) == 0:
			opaque("the call names nothing to check")
		case c.Kind == tool.KindExecute:
			for _, t := range targets {
				us = append(us, c.shellUnits(t)...)
			}
		default:
			for _, t := range targets {
				us = append(us, unit{tool: c.Tool, kind: c.Kind, style: styleOf(c.Kind), target: t, inside: true})
			}
		}
	}
	c.units = &us
	return us
}

// shellUnits splits a command line: one unit per simple command, one
// write_file unit per file a redirection writes, and an opaque unit if
// part of the line cannot be judged.
func (c *Call) shellUnits(src string) []unit {
	l := SplitShell(src)
	var us []unit
	for _, cmd := range l.Commands {
		u := unit{tool: c.Tool, kind: c.Kind, style: styleShell, cmd: cmd, subj: cmd.subject()}
		for _, cand := range cmd.candidates()[1:] {
			u.cands = append(u.cands, cand.subject())
		}
		us = append(us, u)
	}
	for _, w := range l.Writes {
		rel, ok := c.workspacePath(w, l.ChangesDir)
		u := unit{tool: "write_file", kind: tool.KindEdit, style: stylePath, target: rel, inside: ok}
		if !ok {
			u.opaque = "a redirection writes " + strings.ReplaceAll(w, string(hole), "$…") + ", which is not a known path inside the workspace"
		}
		us = append(us, u)
	}
	if l.Opaque != "" || len(l.Commands) == 0 && len(l.Writes) == 0 {
		why := l.Opaque
		if why == "" {
			why = "the line runs no command the policy can see"
		}
		us = append(us, unit{tool: c.Tool, kind: c.Kind, style: styleShell, opaque: why})
	}
	return us
}

// workspacePath returns the workspace-relative path a redirection
// target names, and whether it is a known path inside the workspace: a
// plain relative path (unless the line changes directory) or an
// absolute one under the workspace. It judges the text only: a symlink
// leading out is the sandbox's business.
func (c *Call) workspacePath(w string, changesDir bool) (string, bool) {
	if w == "" || strings.ContainsRune(w, hole) || strings.HasPrefix(w, "~") {
		return "", false
	}
	if filepath.IsAbs(w) {
		if c.Workspace == "" {
			return "", false
		}
		rel, err := filepath.Rel(c.Workspace, w)
		if err != nil {
			return "", false
		}
		w = rel
	} else if changesDir {
		return "", false
	}
	w = path.Clean(filepath.ToSlash(w))
	if w == "." || w == ".." || strings.HasPrefix(w, "../") || path.IsAbs(w) {
		return "", false
	}
	return w, true
}

// editsInside reports whether every file the call changes is a known
// path inside the workspace.
func (c *Call) editsInside() bool {
	us := c.unitsOf()
	for _, u := range us {
		if u.opaque != "" || !u.inside {
			return false
		}
	}
	return len(us) > 0
}

// aliases are the tool names that stand for every tool of a kind.
var aliases = map[string]tool.Kind{"read": tool.KindRead, "edit": tool.KindEdit, "fetch": tool.KindFetch}

// names reports whether the rule's tool part names a tool, by name or by
// its kind's alias.
func (r *Rule) names(toolName string, k tool.Kind) bool {
	switch {
	case r.alias != "" && r.alias == k:
		return true
	case r.literal:
		return r.tool == toolName
	}
	return globMatch(r.tool, toolName)
}

// matchAny is how a deny or ask rule meets the call: yes if it matches
// any unit, maybe if it may match a unit that cannot be judged.
func (c *Call) matchAny(r *Rule) match {
	if r.Whole() {
		if r.names(c.Tool, c.Kind) {
			return yes
		}
		// A redirection of a shell line is a write_file.
		if c.Kind != tool.KindExecute || !r.names("write_file", tool.KindEdit) {
			return no
		}
	} else if !r.names(c.Tool, c.Kind) && !(c.Kind == tool.KindExecute && r.names("write_file", tool.KindEdit)) {
		return no // cheap: the call's input is not looked at
	}
	best := no
	for _, u := range c.unitsOf() {
		if r.names(u.tool, u.kind) && raise(&best, r.matchUnit(u, true)) {
			return yes
		}
	}
	return best
}

// raise keeps in best the strongest match seen, and reports a yes.
func raise(best *match, m match) bool {
	*best = max(*best, m)
	return m == yes
}

// allowedBy returns the allow rule (labelled) that covers the whole
// call, or "" if none does: every unit must be covered by some rule
// (for a shell line, every simple command, and every file it writes,
// which the mode may also cover).
func (c *Call) allowedBy(mode Mode, lists ...[]Rule) string {
	covering := func(u unit) string {
		for _, l := range lists {
			for i := range l {
				r := &l[i]
				if r.names(u.tool, u.kind) && r.matchUnit(u, false) == yes {
					return label(r)
				}
			}
		}
		return ""
	}
	// A rule naming the whole tool covers everything the call does.
	for _, l := range lists {
		for i := range l {
			if r := &l[i]; r.Whole() && r.names(c.Tool, c.Kind) {
				return label(r)
			}
		}
	}
	if !c.anyRuleFor(lists...) {
		return "" // no rule names the tool: its input need not be read
	}
	first := ""
	us := c.unitsOf()
	for _, u := range us {
		by := covering(u)
		if by == "" && u.tool == "write_file" && c.Kind == tool.KindExecute && u.opaque == "" && u.inside &&
			modeDefault(mode, tool.KindEdit, true) == Allow {
			by = "mode " + string(mode)
		}
		if by == "" {
			return ""
		}
		if first == "" {
			first = by
		}
	}
	return first
}

// anyRuleFor reports whether a rule of the lists names the call's tool
// (or write_file, for a shell line's redirections).
func (c *Call) anyRuleFor(lists ...[]Rule) bool {
	for _, l := range lists {
		for i := range l {
			if l[i].names(c.Tool, c.Kind) {
				return true
			}
		}
	}
	return false
}

// matchUnit matches the rule's pattern against one unit. With may (deny
// and ask rules), a unit that cannot be judged, or a command with holes
// the pattern could match once expanded, is maybe; without it (allow
// rules), only a match whatever the holes hold is yes.
func (r *Rule) matchUnit(u unit, may bool) match {
	if r.Whole() {
		return yes
	}
	if u.opaque != "" {
		if may {
			return maybe
		}
		return no
	}
	switch u.style {
	case styleShell:
		best := r.matchCommand(u.subj, may)
		if best == yes || !may {
			return best
		}
		for _, cand := range u.cands {
			if raise(&best, r.matchCommand(cand, may)) {
				return yes
			}
		}
		return best
	case stylePath:
		if pathMatch(r.pattern, u.target) {
			return yes
		}
	case styleURL:
		if urlMatch(r.pattern, u.target) {
			return yes
		}
	default:
		if globMatch(r.pattern, u.target) {
			return yes
		}
	}
	return no
}

// matchCommand matches a command pattern. A pattern ending in " *" also
// matches the command without further words.
func (r *Rule) matchCommand(s string, may bool) match {
	short, hasShort := strings.CutSuffix(r.shell, string(sep)+"*")
	if globMatch(r.shell, s) || hasShort && globMatch(short, s) {
		return yes
	}
	if may && strings.IndexByte(s, hole) >= 0 && (globMayMatch(r.shell, s) || hasShort && globMayMatch(short, s)) {
		return maybe
	}
	return no
}

// urlMatch matches a fetch pattern: domain:HOST against the URL's host
// (case-insensitive, '*' for any run), or a glob over the whole URL.
func urlMatch(pattern, raw string) bool {
	if host, ok := strings.CutPrefix(pattern, "domain:"); ok {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return false
		}
		return globMatch(strings.ToLower(host), strings.ToLower(u.Hostname()))
	}
	return globMatch(pattern, raw)
}
