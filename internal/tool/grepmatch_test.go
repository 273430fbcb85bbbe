package tool

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// naiveLines returns the 0-based numbers of the lines of buf that re
// matches, line by line: what lineMatcher must find, faster.
func naiveLines(re *regexp.Regexp, buf []byte) []int {
	var out []int
	if len(buf) == 0 {
		return nil // an empty file has no line
	}
	lines := bytes.Split(buf, []byte("\n"))
	if len(buf) > 0 && buf[len(buf)-1] == '\n' {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		if re.Match(l) {
			out = append(out, i)
		}
	}
	return out
}

func matcherLines(m *lineMatcher, buf []byte) []int {
	var out []int
	var sc scratch
	m.each(buf, &sc, func(start, end int) bool {
		out = append(out, bytes.Count(buf[:start], []byte("\n")))
		if end < len(buf) && buf[end] != '\n' {
			panic("a line end that is not a line end")
		}
		return true
	})
	return out
}

// checkMatcher compares the fast matcher with the line-by-line one.
func checkMatcher(t interface{ Fatalf(string, ...any) }, pattern string, fold bool, text string) {
	m, err := newLineMatcher(pattern, fold)
	if err != nil {
		return
	}
	want := naiveLines(m.re, []byte(text))
	if got := matcherLines(m, []byte(text)); !slices.Equal(got, want) {
		t.Fatalf("pattern %q (fold %v, lit %q fold %v exact %v sets %d) on %q: lines %v, want %v", pattern, fold, m.lit, m.fold, m.exact, len(m.sets), text, got, want)
	}
}

// TestLineMatcherFindsWhatLineByLineFinds: for random expressions and
// texts, the prefiltered search finds exactly the lines a line-by-line
// match finds.
func TestLineMatcherFindsWhatLineByLineFinds(t *testing.T) {
	atoms := []string{"a", "b", "k", "K", "s", "_", "ab", "abc", "Ab", "é", "\u212a", "[a-c]", "[A-Z]", "[0-9]", `\d`, `\w`, `\s`, ".", "[^a]", `\b`, "^", "$", "(a|b)", "(ab|cd)", "x"}
	reps := []string{"", "", "", "+", "*", "?", "{2}", "{2,}", "{1,3}", "{3}"}
	alphabet := []string{"a", "b", "c", "d", "k", "K", "s", "S", "ſ", "\u212a", "x", "_", "0", "1", "9", " ", "\n", "é", "A", "B", "Z"}
	rapid.Check(t, func(rt *rapid.T) {
		var sb strings.Builder
		for range rapid.IntRange(1, 6).Draw(rt, "atoms") {
			sb.WriteString(rapid.SampledFrom(atoms).Draw(rt, "atom"))
			sb.WriteString(rapid.SampledFrom(reps).Draw(rt, "rep"))
		}
		var text strings.Builder
		for range rapid.IntRange(0, 80).Draw(rt, "len") {
			text.WriteString(rapid.SampledFrom(alphabet).Draw(rt, "ch"))
		}
		checkMatcher(rt, sb.String(), rapid.Bool().Draw(rt, "fold"), text.String())
	})
}

func TestLineMatcherChoosesAPrefilter(t *testing.T) {
	for _, c := range []struct {
		pattern string
		fold    bool
		lit     string
		litFold bool
		exact   bool
		sets    int
	}{
		{"Lstat", false, "Lstat", false, true, 0},
		{`func \(\w+ \*Root\)`, false, " *Root)", false, false, 0},
		{"newreader", true, "newreader", true, false, 0},
		{`[0-9]{12,}`, false, "", false, false, 12},
		{`\b[A-Z]{4,}_[A-Z]+\b`, false, "", false, false, 6},
		{`\w+Error\(`, false, "Error(", false, false, 0},
		{`.*`, false, "", false, false, 0},
	} {
		m, err := newLineMatcher(c.pattern, c.fold)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.lit) != c.lit || m.fold != c.litFold || m.exact != c.exact || len(m.sets) != c.sets {
			t.Errorf("%q: lit %q fold %v exact %v sets %d; want %q %v %v %d", c.pattern, m.lit, m.fold, m.exact, len(m.sets), c.lit, c.litFold, c.exact, c.sets)
		}
	}
}

// FuzzLineMatcher: any expression and text; the fast search agrees
// with the line-by-line one and never panics.
func FuzzLineMatcher(f *testing.F) {
	f.Add("Lstat", false, "a Lstat\nb\nLstat")
	f.Add(`[0-9]{3,}`, false, "12\n1234\nx999")
	f.Add(`(?i)kelvin`, false, "\u212aelvin\nKELVIN")
	f.Add(`a\nb`, true, "a\nb")
	f.Add(`^$`, false, "\n\nx\n")
	f.Fuzz(func(t *testing.T, pattern string, fold bool, text string) {
		checkMatcher(t, pattern, fold, text)
	})
}

// TestASCIILower: the word-at-a-time lower-casing equals the byte-wise
// one on every byte value.
func TestASCIILower(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		b := rapid.SliceOf(rapid.Byte()).Draw(rt, "b")
		got := asciiLower(b, nil)
		for i, c := range b {
			want := c
			if c >= 'A' && c <= 'Z' {
				want = c + 32
			}
			if got[i] != want {
				rt.Fatalf("byte %d: %#x became %#x, want %#x", i, c, got[i], want)
			}
		}
	})
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if got := asciiLower(all, nil); !bytes.Equal(got[:'A'], all[:'A']) || string(got['A':'Z'+1]) != "abcdefghijklmnopqrstuvwxyz" || !bytes.Equal(got['Z'+1:], all['Z'+1:]) {
		t.Errorf("asciiLower of every byte: %q", got)
	}
}
