package protocol

import (
	"strconv"
	"strings"
)

// ShellResult is the shell tool's result text (tool.completed's result,
// and the stored tool_result block's content) split into its parts. The
// text is
//
//	exit code: N
//	note: …            (zero or more lines)
//	stdout:
//	…the command's stdout, ending in a newline when not empty…
//	stderr:
//	…the command's stderr…
//
// A stream the tool cut at its limit ends with a line
// "[stdout truncated: N more bytes not shown]" (or stderr), which is
// kept in Stdout (or Stderr) as it is. Clients show the output itself:
// the exit code as a badge, stdout, then stderr marked as such.
type ShellResult struct {
	ExitCode int
	// Notes are the "note:" lines, without their prefix.
	Notes  []string
	Stdout string
	Stderr string
}

// String is the result's text, as the shell tool writes it.
func (r ShellResult) String() string {
	var b strings.Builder
	b.WriteString("exit code: ")
	b.WriteString(strconv.Itoa(r.ExitCode))
	b.WriteByte('\n')
	for _, n := range r.Notes {
		b.WriteString("note: ")
		b.WriteString(n)
		b.WriteByte('\n')
	}
	for _, s := range [...]struct{ name, text string }{{"stdout", r.Stdout}, {"stderr", r.Stderr}} {
		b.WriteString(s.name)
		b.WriteString(":\n")
		b.WriteString(s.text)
		if s.text != "" && !strings.HasSuffix(s.text, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// ShellExitCode reads the exit code from the first line of a shell
// result, ok false when the text does not begin "exit code: N".
func ShellExitCode(text string) (code int, ok bool) {
	rest, found := strings.CutPrefix(text, "exit code: ")
	if !found {
		return 0, false
	}
	line, _, found := strings.Cut(rest, "\n")
	if !found {
		return 0, false
	}
	code, err := strconv.Atoi(line)
	if err != nil || strconv.Itoa(code) != line {
		return 0, false // "+3", "03": not what the tool writes
	}
	return code, true
}

// ParseShellResult splits a shell result into its parts. ok is false
// when the text is not a shell result, or when it cannot be split for
// sure: a line "stderr:" that the command printed itself makes two
// candidate splits, and a client then shows the text as it is.
func ParseShellResult(text string) (r ShellResult, ok bool) {
	code, ok := ShellExitCode(text)
	if !ok {
		return ShellResult{}, false
	}
	_, rest, _ := strings.Cut(text, "\n")
	var notes []string
	for strings.HasPrefix(rest, "note: ") {
		var line string
		if line, rest, ok = strings.Cut(rest, "\n"); !ok {
			return ShellResult{}, false
		}
		notes = append(notes, strings.TrimPrefix(line, "note: "))
	}
	if rest, ok = strings.CutPrefix(rest, "stdout:\n"); !ok {
		return ShellResult{}, false
	}
	at := -1
	for i := 0; i < len(rest); i++ {
		if (i == 0 || rest[i-1] == '\n') && strings.HasPrefix(rest[i:], "stderr:\n") {
			if at >= 0 {
				return ShellResult{}, false
			}
			at = i
		}
	}
	if at < 0 {
		return ShellResult{}, false
	}
	return ShellResult{ExitCode: code, Notes: notes, Stdout: rest[:at], Stderr: rest[at+len("stderr:\n"):]}, true
}
