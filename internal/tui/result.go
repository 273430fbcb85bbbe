package tui

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// result is "✓ summary" (or, from a snapshot, which holds no summary,
// "exit N" for a shell call and the result's first line for others),
// plus the first lines of the result when expanded, and the diff of a
// file tool. A command that exited non-zero is "✗ exit N" with its
// first lines. A shell result shows the output itself: stdout, then
// stderr in red, without the tool's section labels. Everything a tool
// returned is made printable first: a command's output must not drive
// the terminal.
func (r *renderer) result(tc *client.ToolCall) string {
	st := r.m.st
	sr, isShell := protocol.ShellResult{}, false
	if tc.Name == "shell" {
		sr, isShell = protocol.ParseShellResult(tc.Result)
	}
	head := printable(tc.Summary)
	switch {
	case head != "":
	case isShell:
		head = "exit " + strconv.Itoa(sr.ExitCode)
		if sr.Stdout == "" && sr.Stderr == "" {
			head += " · no output"
		}
	default:
		head = printable(firstLines(tc.Result, 1))
	}
	if head == "" {
		head = st.faint.Render("(no output)")
	}
	failed := exitFailed(tc)
	mark := st.ok.Render("  ✓ ")
	if failed {
		mark = st.err.Render("  ✗ ")
		head = st.err.Render(head)
	}
	out := mark + ansi.Truncate(head, r.w-4, "…")
	limit := 0
	switch {
	case r.m.expanded:
		limit = resultLinesExpanded
	case failed:
		limit = 4
	}
	if limit > 0 && tc.Result != "" {
		var body []string
		if isShell {
			body = r.shellLines(sr, limit)
		} else {
			body = r.plainLines(tc.Result, limit)
		}
		if len(body) > 0 {
			out += "\n" + strings.Join(body, "\n")
		}
	}
	if d := r.m.diffs[tc.ID]; d != nil && d.diff != "" {
		limit := diffLinesCollapsed
		if r.m.expanded {
			limit = diffLinesExpanded
		}
		out += "\n" + indent(r.m.renderDiff(d.diff, limit, r.w-4), "    ")
	}
	return out
}

// plainLines is up to limit lines of a tool's result, indented, faint,
// printable, each cut to the width, and "…" when there is more.
func (r *renderer) plainLines(text string, limit int) []string {
	var out []string
	for _, l := range strings.Split(firstLines(text, limit), "\n") {
		out = append(out, r.m.st.faint.Render("    "+ansi.Truncate(printable(l), r.w-4, "…")))
	}
	return out
}

// shellLines is up to limit lines of a command's output: its notes,
// stdout, then stderr in red (as the live card draws them), and "…" when
// there is more.
func (r *renderer) shellLines(sr protocol.ShellResult, limit int) []string {
	st := r.m.st
	type line struct {
		text   string
		stderr bool
	}
	var all []line
	for _, n := range sr.Notes {
		all = append(all, line{text: "note: " + n})
	}
	for _, s := range []struct {
		text   string
		stderr bool
	}{{sr.Stdout, false}, {sr.Stderr, true}} {
		if s.text == "" {
			continue
		}
		for _, l := range strings.Split(strings.TrimSuffix(s.text, "\n"), "\n") {
			all = append(all, line{l, s.stderr})
		}
	}
	var out []string
	for i, l := range all {
		if i == limit {
			out = append(out, st.faint.Render("    …"))
			break
		}
		s := st.faint
		if l.stderr {
			s = st.err.Faint(true)
		}
		out = append(out, s.Render("    "+ansi.Truncate(printable(l.text), r.w-4, "…")))
	}
	return out
}

// exitFailed reports whether a completed shell call's command exited
// non-zero: the view's exit code (tool.completed's exit_code live, the
// stored result's first line in a snapshot), else (an older server) its
// summary "exit N in …".
func exitFailed(tc *client.ToolCall) bool {
	if tc.ExitCode != nil {
		return *tc.ExitCode != 0
	}
	rest, ok := strings.CutPrefix(tc.Summary, "exit ")
	if !ok {
		return false
	}
	code, _, _ := strings.Cut(rest, " ")
	return code != "0" && code != ""
}

// printableLines is printable applied to each line of s.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}
