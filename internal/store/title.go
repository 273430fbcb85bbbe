package store

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTitleRunes bounds a session title, the ellipsis included.
const MaxTitleRunes = 80

// Title derives a session title from the text of its first user
// message: runs of white space (newlines included) become one space,
// leading and trailing space is dropped, and text longer than
// MaxTitleRunes runes is cut on a rune boundary and ends with "…".
// Text holding no visible character gives "".
func Title(text string) string {
	var b strings.Builder
	runes, space := 0, false
	for _, r := range text {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if r == utf8.RuneError || unicode.IsControl(r) {
			continue
		}
		if space {
			if runes+1 > MaxTitleRunes {
				return cut(b.String())
			}
			b.WriteByte(' ')
			runes++
			space = false
		}
		if runes+1 > MaxTitleRunes {
			return cut(b.String())
		}
		b.WriteRune(r)
		runes++
	}
	return b.String()
}

// cut ends s, exactly MaxTitleRunes runes long, with an ellipsis in
// place of its last rune (and of a space before it).
func cut(s string) string {
	_, n := utf8.DecodeLastRuneInString(s)
	return strings.TrimRight(s[:len(s)-n], " ") + "…"
}
