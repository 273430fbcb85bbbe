package tool

import "strings"

// seekLines finds pattern as consecutive lines of lines, starting at or
// after start, and returns the index of its first line or -1. It tries,
// in order, an exact match, one ignoring trailing whitespace, one
// ignoring leading and trailing whitespace, and one that also reads
// typographic dashes, quotes and spaces as their ASCII forms (as Codex's
// apply_patch does: a model often writes the ASCII form of what the file
// holds). With eof the pattern is first looked for at the very end of
// the file, then anywhere after start.
func seekLines(lines, pattern []string, start int, eof bool) int {
	if len(pattern) == 0 {
		return start
	}
	if len(pattern) > len(lines) || start > len(lines)-len(pattern) {
		return -1
	}
	for _, eq := range []func(a, b string) bool{
		func(a, b string) bool { return a == b },
		func(a, b string) bool { return strings.TrimRight(a, " \t") == strings.TrimRight(b, " \t") },
		func(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) },
		func(a, b string) bool { return normalizePunct(a) == normalizePunct(b) },
	} {
		if eof {
			if at := len(lines) - len(pattern); matchAt(lines, pattern, at, eq) {
				return at
			}
		}
		for i := start; i <= len(lines)-len(pattern); i++ {
			if matchAt(lines, pattern, i, eq) {
				return i
			}
		}
	}
	return -1
}

func matchAt(lines, pattern []string, at int, eq func(a, b string) bool) bool {
	for j, p := range pattern {
		if !eq(lines[at+j], p) {
			return false
		}
	}
	return true
}

// punct maps typographic characters to the ASCII a model writes.
var punct = strings.NewReplacer(
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'",
	"\u201C", `"`, "\u201D", `"`, "\u201E", `"`, "\u201F", `"`,
	"\u00A0", " ", "\u2002", " ", "\u2003", " ", "\u2004", " ", "\u2005", " ", "\u2006", " ",
	"\u2007", " ", "\u2008", " ", "\u2009", " ", "\u200A", " ", "\u202F", " ", "\u205F", " ", "\u3000", " ",
)

func normalizePunct(s string) string { return punct.Replace(strings.TrimSpace(s)) }
