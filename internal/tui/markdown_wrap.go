package tui

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// span is a piece of inline text in one style, or a hard line break.
type span struct {
	text string
	st   mdStyle
	br   bool
	run  int // in a wrapped line: the index of the span it came from
}

// inlineText is a block's inline content as styled spans, before it is
// wrapped. Keeping the text apart from its styles lets the wrapping
// measure and cut plain text, then style each piece of a line once.
type inlineText []span

// add appends s in style st, cleaned of what a terminal must not be
// sent.
func (t *inlineText) add(st mdStyle, s string) {
	if s = clean(s); s != "" {
		*t = append(*t, span{text: s, st: st})
	}
}

func (t *inlineText) lineBreak() { *t = append(*t, span{br: true}) }

// plain is the text without styles, line breaks as spaces.
func (t inlineText) plain() string {
	var b strings.Builder
	for _, s := range t {
		if s.br {
			b.WriteByte(' ')
			continue
		}
		b.WriteString(s.text)
	}
	return b.String()
}

// line renders the text on one line, line breaks as spaces.
func (t inlineText) line(st *mdStyles) string {
	var b strings.Builder
	for _, s := range t {
		if s.br {
			b.WriteByte(' ')
			continue
		}
		b.WriteString(st.style(s.st).Render(s.text))
	}
	return b.String()
}

// wrap lays the text out in lines of at most width cells (width <= 0:
// only the hard line breaks): greedily, breaking at spaces, and cutting
// a word wider than the width at the width (at grapheme boundaries). The
// spaces where a line breaks are dropped.
func (t inlineText) wrap(width int, st *mdStyles) []mdLine {
	if len(t) == 0 {
		return nil
	}
	w := wrapper{width: width, st: st, fresh: true}
	for i, s := range t {
		if s.br {
			w.endWord()
			w.endLine()
			w.fresh = true
			continue
		}
		for rest := s.text; rest != ""; {
			word := strings.TrimLeft(rest, " ")
			if spaces := rest[:len(rest)-len(word)]; spaces != "" {
				w.endWord()
				w.spaces = append(w.spaces, span{text: spaces, st: s.st, run: i})
			}
			end := strings.IndexByte(word, ' ')
			if end < 0 {
				end = len(word)
			}
			if end > 0 {
				w.word = append(w.word, span{text: word[:end], st: s.st, run: i})
				w.wordWidth += cellWidth(word[:end])
			}
			rest = word[end:]
		}
	}
	w.endWord()
	if len(w.line) > 0 {
		w.endLine()
	}
	return w.lines
}

// wrapper is the state of one wrap: the lines done, the line being
// filled, the spaces after its last word and the word being read.
type wrapper struct {
	width     int
	st        *mdStyles
	lines     []mdLine
	line      []span
	lineWidth int
	fresh     bool // the line starts the text or follows a hard break
	spaces    []span
	word      []span
	wordWidth int
}

func (w *wrapper) fits(n int) bool { return w.width <= 0 || n <= w.width }

// endWord places the word just read: on the current line after the
// spaces before it if it fits, else at the start of the next line, cut
// into pieces if it is wider than the width. Spaces that start the text
// or follow a hard break are kept (a raw line's indentation); spaces
// where a line wraps are dropped.
func (w *wrapper) endWord() {
	if len(w.word) == 0 {
		return
	}
	spaceWidth := 0
	for _, s := range w.spaces {
		spaceWidth += cellWidth(s.text)
	}
	switch {
	case (len(w.line) > 0 || w.fresh) && w.fits(w.lineWidth+spaceWidth+w.wordWidth):
		for _, s := range w.spaces {
			w.put(s, s.text)
		}
		for _, s := range w.word {
			w.put(s, s.text)
		}
	case w.fits(w.wordWidth):
		if len(w.line) > 0 {
			w.endLine()
		}
		for _, s := range w.word {
			w.put(s, s.text)
		}
	default:
		if len(w.line) > 0 {
			w.endLine()
		}
		w.cut()
	}
	w.spaces, w.word, w.wordWidth = w.spaces[:0], w.word[:0], 0
}

// cut places a word wider than the width over as many lines as it
// takes.
func (w *wrapper) cut() {
	for _, s := range w.word {
		for rest := s.text; rest != ""; {
			head := truncate(rest, w.width-w.lineWidth)
			if head == "" && len(w.line) > 0 {
				w.endLine()
				continue
			}
			if head == "" {
				// A character wider than the whole width: on its own.
				head = truncate(rest, 2)
			}
			if head == "" || !strings.HasPrefix(rest, head) {
				head = rest // cannot happen with cleaned text; never loop
			}
			w.put(s, head)
			rest = rest[len(head):]
			if rest != "" {
				w.endLine()
			}
		}
	}
}

// put appends text from span s to the line, merged with the piece
// before it when both come from the same span.
func (w *wrapper) put(s span, text string) {
	w.lineWidth += cellWidth(text)
	if n := len(w.line); n > 0 && w.line[n-1].run == s.run {
		w.line[n-1].text += text
		return
	}
	w.line = append(w.line, span{text: text, st: s.st, run: s.run})
}

// endLine renders the current line and starts the next one; the spaces
// waiting for a word are dropped.
func (w *wrapper) endLine() {
	var b strings.Builder
	for _, s := range w.line {
		b.WriteString(w.st.style(s.st).Render(s.text))
	}
	w.lines = append(w.lines, mdLine{text: b.String()})
	w.line, w.lineWidth, w.spaces, w.fresh = w.line[:0], 0, w.spaces[:0], false
}

// cellWidth is the terminal width of s, cleaned text without escape
// sequences: its length when it is printable ASCII (most words), else
// ansi.StringWidth.
func cellWidth(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return ansi.StringWidth(s)
		}
	}
	return len(s)
}

// truncate is the longest prefix of s (cleaned text) at most n cells
// wide. It looks at a window of s a little longer than n can fill, so
// that cutting a very long word is linear rather than quadratic.
func truncate(s string, n int) string {
	if end := 8 * (n + 4); end < len(s) {
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		s = s[:end]
	}
	return ansi.Truncate(s, n, "")
}
