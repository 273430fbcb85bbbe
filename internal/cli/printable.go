package cli

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// Printable is text from the stream (a model's answer, a tool's result,
// a command line) made safe to print on a terminal: escape sequences
// are removed and other control characters dropped, but for line breaks
// and tabs. A model or a file it read must not drive the user's
// terminal: an OSC 52 sequence would set the clipboard, a cursor move or
// an erased line would hide what a command really does.
func Printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, isControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return -1
		}
		return r
	}, ansi.Strip(strings.ToValidUTF8(s, "\uFFFD")))
}

// isControl reports a C0 or C1 control character, or DEL, but for a
// line break or a tab.
func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0)
}
