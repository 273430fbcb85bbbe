package store

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTitle(t *testing.T) {
	long := strings.Repeat("a", 200)
	cases := []struct{ in, want string }{
		{"", ""},
		{" \n\t ", ""},
		{"  fix\n\nthe   bug\t now  ", "fix the bug now"},
		{strings.Repeat("a", 80), strings.Repeat("a", 80)},
		{strings.Repeat("a", 81), strings.Repeat("a", 79) + "…"},
		{long, strings.Repeat("a", 79) + "…"},
		{strings.Repeat("é", 100), strings.Repeat("é", 79) + "…"},
		{strings.Repeat("a", 78) + " bc", strings.Repeat("a", 78) + "…"},
		{"bell\x07 and \xff bad", "bell and bad"},
	}
	for _, c := range cases {
		got := Title(c.in)
		if got != c.want {
			t.Errorf("Title(%q) = %q, want %q", c.in, got, c.want)
		}
		if n := utf8.RuneCountInString(got); n > MaxTitleRunes || !utf8.ValidString(got) {
			t.Errorf("Title(%q) = %q: %d runes, valid %v", c.in, got, n, utf8.ValidString(got))
		}
	}
}

func FuzzTitle(f *testing.F) {
	for _, s := range []string{"", "hello world", strings.Repeat("ab ", 60), "\xff\xfe", "日本語 テキスト"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Title(s)
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > MaxTitleRunes {
			t.Fatalf("Title(%q) = %q", s, got)
		}
		if strings.TrimSpace(got) != got || strings.Contains(got, "  ") {
			t.Fatalf("Title(%q) = %q: untrimmed space", s, got)
		}
		if Title(got) != got && !strings.HasSuffix(got, "…") {
			t.Fatalf("Title not idempotent on %q", got)
		}
	})
}
