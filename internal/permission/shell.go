package permission

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Line is a shell command line as the policy judges it: the simple
// commands it may run, the files its redirections write, and whether
// some part of it cannot be judged at all.
type Line struct {
	// Commands are the simple commands of the line, wherever they are:
	// in lists (&&, ||, ;, &), pipelines, subshells, { blocks },
	// command and process substitutions, here-documents, function
	// bodies, conditionals and loops, and the scripts of sh -c and eval
	// when those are plain text. Their words are the words the shell
	// passes after quote removal, a part that only the shell can expand
	// ($VAR, $(…), `…`) being a hole.
	Commands []Command
	// Writes are the targets of redirections that write a file (>, >>,
	// >|, &>, &>>, <>, >& FILE), as written (a hole where not plain
	// text); /dev/null, /dev/stdout and /dev/stderr are left out.
	Writes []string
	// ChangesDir is set when the line runs cd, pushd or popd: relative
	// write targets are then not known to be relative to the workspace.
	ChangesDir bool
	// Opaque, when not empty, says why a part of the line cannot be
	// judged: it does not parse, a command's name is not plain text, it
	// assigns a variable that decides what runs (PATH, LD_PRELOAD, …),
	// or it uses arithmetic, which can run commands hidden in variables.
	// Such a line is never allowed by a rule.
	Opaque string
}

// Command is one simple command of a Line.
type Command struct {
	Words []string
}

// String returns the command as it would be typed, a hole shown as $…
// (for messages).
func (c Command) String() string {
	ws := make([]string, len(c.Words))
	for i, w := range c.Words {
		ws[i] = strings.ReplaceAll(w, string(hole), "$…")
	}
	return strings.Join(ws, " ")
}

// subject is the command as a rule's command glob sees it: its words
// joined by sep.
func (c Command) subject() string { return strings.Join(c.Words, string(sep)) }

// maxShellDepth bounds the nesting of sh -c and eval scripts the
// splitter reads; deeper ones are opaque.
const maxShellDepth = 4

// maxLineBytes bounds the command lines the splitter parses; a longer
// one is opaque.
const maxLineBytes = 256 << 10

// SplitShell splits a command line into what the policy judges. It never
// fails: what it cannot read makes the line Opaque.
func SplitShell(src string) Line {
	var l Line
	splitInto(&l, src, 0)
	return l
}

func splitInto(l *Line, src string, depth int) {
	if depth > maxShellDepth {
		l.opaque("shell scripts nested more than %d deep", maxShellDepth)
		return
	}
	if len(src) > maxLineBytes {
		l.opaque("the command line is longer than %d bytes", maxLineBytes)
		return
	}
	if strings.ContainsAny(src, "\x00\x01") {
		l.opaque("the command line holds control bytes")
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		l.opaque("the shell parser cannot read it: %v", err)
		return
	}
	sp := &splitter{l: l, depth: depth}
	syntax.Walk(f, sp.visit)
}

func (l *Line) opaque(format string, args ...any) {
	if l.Opaque == "" {
		l.Opaque = fmt.Sprintf(format, args...)
	}
}

type splitter struct {
	l     *Line
	depth int
}

// visit judges one node of the syntax tree; returning true walks into
// its children, where nested commands are found.
func (sp *splitter) visit(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.CallExpr:
		sp.call(n)
	case *syntax.Stmt:
		for _, r := range n.Redirs {
			sp.redirect(r)
		}
	case *syntax.DeclClause:
		for _, a := range n.Args {
			if a.Naked && a.Name == nil && a.Value != nil {
				if _, plain := wordText(a.Value); !plain {
					sp.l.opaque("%s with an argument that is not plain text", n.Variant.Value)
				}
			}
			sp.assign(a)
		}
	case *syntax.ArithmCmd, *syntax.ArithmExp, *syntax.LetClause, *syntax.CStyleLoop:
		sp.l.opaque("it uses shell arithmetic, which can run commands hidden in variables")
	case *syntax.BinaryTest:
		switch n.Op {
		case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
			sp.l.opaque("it uses an arithmetic test, which can run commands hidden in variables")
		}
	case *syntax.UnaryTest:
		if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
			sp.l.opaque("it tests a variable by name, which can run commands hidden in its subscript")
		}
	case *syntax.TestDecl, *syntax.CoprocClause:
		sp.l.opaque("it uses a construct the policy does not judge")
	}
	return true
}

// dangerousVars are variables whose value decides what a later command
// runs or loads: assigning one makes the line opaque.
var dangerousVars = map[string]bool{"PATH": true, "BASH_ENV": true, "ENV": true, "IFS": true, "SHELLOPTS": true,
	"BASHOPTS": true, "PS4": true, "PROMPT_COMMAND": true, "HOME": true, "ZDOTDIR": true, "PAGER": true,
	"EDITOR": true, "VISUAL": true, "NODE_OPTIONS": true, "PYTHONPATH": true, "PYTHONSTARTUP": true,
	"PERL5OPT": true, "PERL5LIB": true, "RUBYOPT": true, "RUBYLIB": true, "JAVA_TOOL_OPTIONS": true,
	"CDPATH": true, "GLOBIGNORE": true, "BASH_XTRACEFD": true}

func dangerousVar(name string) bool {
	return dangerousVars[name] || strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "DYLD_") ||
		strings.HasPrefix(name, "GIT_") || strings.HasPrefix(name, "BASH_FUNC_")
}

func (sp *splitter) assign(a *syntax.Assign) {
	if a.Name != nil && dangerousVar(a.Name.Value) {
		sp.l.opaque("it sets %s, which decides what commands run", a.Name.Value)
	}
	if a.Name != nil && a.Index != nil {
		sp.l.opaque("it assigns an array element, whose subscript the shell evaluates")
	}
}

// Interpreters whose -c argument is a script the splitter reads, and
// commands that run their arguments as a command (wrappers): for deny
// and ask rules, every tail of a wrapper's arguments is judged as a
// command too.
var (
	shells   = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true}
	wrappers = map[string]bool{"command": true, "builtin": true, "exec": true, "nohup": true, "time": true,
		"nice": true, "env": true, "sudo": true, "doas": true, "timeout": true, "stdbuf": true, "xargs": true,
		"watch": true, "setsid": true, "ionice": true, "chrt": true, "taskset": true, "unbuffer": true,
		"flock": true, "chroot": true, "runuser": true, "su": true, "strace": true, "ltrace": true,
		"caffeinate": true, "script": true, "parallel": true, "find": true, "busybox": true, "eatmydata": true}
	varTests = map[string]bool{"-v": true, "-R": true, "-eq": true, "-ne": true, "-lt": true, "-le": true, "-gt": true, "-ge": true}
)

func (sp *splitter) call(c *syntax.CallExpr) {
	for _, a := range c.Assigns {
		sp.assign(a)
	}
	if len(c.Args) == 0 {
		return // assignments only: nothing runs (their $(…) are walked)
	}
	words := make([]string, len(c.Args))
	plain := make([]bool, len(c.Args))
	for i, w := range c.Args {
		words[i], plain[i] = wordText(w)
	}
	name := words[0]
	if !plain[0] || !literalName(name) {
		sp.l.opaque("a command name is not plain text (%s)", Command{Words: words[:1]})
		return
	}
	sp.l.Commands = append(sp.l.Commands, Command{Words: words})
	sp.runs(words, plain)
	if wrappers[baseName(name)] {
		// The command a wrapper runs: its scripts are read too.
		for i := 1; i < len(words); i++ {
			if plain[i] && literalName(words[i]) {
				sp.runs(words[i:], plain[i:])
			}
		}
	}
}

// runs looks at what a command of these words runs beyond itself: the
// script of eval or sh -c, a change of directory, a test that evaluates
// a variable.
func (sp *splitter) runs(words []string, plain []bool) {
	base := baseName(words[0])
	switch base {
	case "cd", "pushd", "popd":
		sp.l.ChangesDir = true
	case "test", "[", "printf", "read", "mapfile", "readarray", "unset", "declare", "typeset", "local", "export":
		for _, w := range words[1:] {
			if varTests[w] {
				sp.l.opaque("%s %s can run commands hidden in a variable's subscript", base, w)
			}
		}
	case "eval":
		sp.script(strings.Join(words[1:], " "), allPlain(plain[1:]), "eval")
	}
	if !shells[base] {
		return
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if !plain[i] || !strings.HasPrefix(w, "-") || strings.HasPrefix(w, "--") {
			continue
		}
		if strings.Contains(w, "c") {
			if i+1 < len(words) {
				sp.script(words[i+1], plain[i+1], base+" -c")
			} else {
				sp.l.opaque("%s -c without a script", base)
			}
			return
		}
	}
}

func baseName(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }

// script splits a script run by eval or sh -c as part of the line.
func (sp *splitter) script(src string, plain bool, by string) {
	if !plain {
		sp.l.opaque("the script of %s is not plain text", by)
		return
	}
	splitInto(sp.l, src, sp.depth+1)
}

func allPlain(ps []bool) bool {
	for _, p := range ps {
		if !p {
			return false
		}
	}
	return true
}

// literalName reports whether a command name, already plain text, runs
// what it says: no unquoted glob or brace expansion can change it.
// (wordText leaves quoted characters as they are, so this is
// conservative: a quoted "*" in a name is refused too.)
func literalName(s string) bool {
	return s != "" && !strings.ContainsAny(s, "*?[]{}~")
}

// redirect records the file a redirection writes.
func (sp *splitter) redirect(r *syntax.Redirect) {
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
	case syntax.DplOut:
		// >&N and >&- duplicate or close a descriptor; >& FILE (bash)
		// writes FILE.
		if w, plain := wordText(r.Word); plain && (w == "-" || strings.Trim(w, "0123456789") == "" || strings.Trim(w, "0123456789") == "-") {
			return
		}
	default:
		return // input: <, <&, here-documents and here-strings
	}
	w, _ := wordText(r.Word)
	switch w {
	case "/dev/null", "/dev/stdout", "/dev/stderr":
		return
	}
	sp.l.Writes = append(sp.l.Writes, w)
}

// wordText returns the text the shell would pass for w, after quote
// removal, with a hole for each part only the shell can expand, and
// whether it holds no hole.
func wordText(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", true
	}
	var b strings.Builder
	plain := true
	gap := func() {
		b.WriteByte(hole)
		plain = false
	}
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			s := unescape(p.Value, false)
			if braceExpands(s) {
				gap()
				continue
			}
			b.WriteString(s)
		case *syntax.SglQuoted:
			if p.Dollar {
				gap() // $'…' decodes escapes: not taken as written
				continue
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				gap()
				continue
			}
			for _, in := range p.Parts {
				if l, ok := in.(*syntax.Lit); ok {
					b.WriteString(unescape(l.Value, true))
				} else {
					gap()
				}
			}
		default: // $VAR, ${…}, $(…), `…`, $((…)), <(…), extended globs
			gap()
		}
	}
	s := b.String()
	if strings.ContainsRune(s, sep) {
		return string(hole), false
	}
	return s, plain
}

// unescape removes the backslashes of an unquoted literal (every
// backslash escapes the next character; a backslash-newline is removed)
// or, in double quotes, those before $ ` " \ and newline.
func unescape(s string, quoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		next := s[i+1]
		switch {
		case next == '\n':
			i++
		case !quoted || strings.IndexByte("$`\"\\", next) >= 0:
			b.WriteByte(next)
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// braceExpands reports whether an unquoted literal holds a brace
// expansion bash would expand ({a,b} or {1..3}); "{}" (find's
// placeholder) does not.
func braceExpands(s string) bool {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return false
	}
	rest := s[open+1:]
	end := strings.IndexByte(rest, '}')
	if end < 0 {
		return false
	}
	in := rest[:end]
	return strings.Contains(in, ",") || strings.Contains(in, "..") || braceExpands(rest)
}

// candidates returns the word lists a deny or ask rule is matched
// against for c: the command itself and, for a wrapper (env, sudo,
// xargs, timeout, find -exec, …), every tail of its arguments, so that
// "sudo rm -rf x" and "xargs rm" meet a rule about rm.
//
// A command named by a path ("/bin/rm") is also judged by its base name
// ("rm").
func (c Command) candidates() []Command {
	var out []Command
	add := func(words []string) {
		out = append(out, Command{Words: words})
		if base := baseName(words[0]); base != words[0] && base != "" {
			out = append(out, Command{Words: append([]string{base}, words[1:]...)})
		}
	}
	add(c.Words)
	if !wrappers[baseName(c.Words[0])] {
		return out
	}
	for i := 1; i < len(c.Words); i++ {
		add(c.Words[i:])
	}
	return out
}
