package tui

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// mdLine is one rendered terminal line. Code lines (from code blocks)
// are never wrapped, so they may be wider than the width; every other
// line fits.
type mdLine struct {
	text string
	code bool
}

// minWidth is the narrowest a nested block is laid out at: the widest
// character takes two cells. A block quote or list item that would
// leave less drops its indentation instead.
const minWidth = 2

// codeIndent sets code blocks off from the text around them.
const codeIndent = "  "

// bullets mark unordered list items, by nesting depth.
var bullets = [...]string{"•", "◦", "▪"}

// mdRenderer walks one parsed message and lays its blocks out as
// terminal lines: blocks are separated by a blank line, paragraphs and
// headings are word-wrapped to the width, containers (block quotes,
// list items) indent what they hold.
type mdRenderer struct {
	parser  parser.Parser
	st      *mdStyles
	src     []byte
	bullets int // depth of nested bullet lists
}

func (r *mdRenderer) document(src []byte, width int) []mdLine {
	r.src = src
	return r.children(r.parser.Parse(text.NewReader(src)), width, false)
}

// children lays out n's child blocks one after the other, with a blank
// line between them unless tight (the items of a tight list).
func (r *mdRenderer) children(n ast.Node, width int, tight bool) []mdLine {
	var out []mdLine
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		lines := r.block(c, width)
		if len(lines) == 0 {
			continue
		}
		if len(out) > 0 && !tight {
			out = append(out, mdLine{})
		}
		out = append(out, lines...)
	}
	return out
}

func (r *mdRenderer) block(n ast.Node, width int) []mdLine {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		if lines, ok := r.table(n, width); ok {
			return lines
		}
		return r.inline(n, mdStyle{}).wrap(width, r.st)
	case *ast.Heading:
		var t inlineText
		st := mdStyle{kind: kindHeading, bold: true} // bold carries into links and code
		t.add(st, strings.Repeat("#", n.Level)+" ")
		r.inlines(&t, n, st)
		return t.wrap(width, r.st)
	case *ast.ThematicBreak:
		w := width
		if w <= 0 {
			w = 40
		}
		return []mdLine{{text: r.st.rule.Render(strings.Repeat("─", w))}}
	case *ast.FencedCodeBlock:
		return r.code(n)
	case *ast.CodeBlock:
		return r.code(n)
	case *ast.Blockquote:
		return r.quote(n, width)
	case *ast.List:
		return r.list(n, width)
	case *ast.HTMLBlock:
		lines := r.raw(n.Lines(), width)
		if n.HasClosure() {
			closure := text.NewSegments()
			closure.Append(n.ClosureLine)
			lines = append(lines, r.raw(closure, width)...)
		}
		return lines
	}
	if !n.HasChildren() {
		// A leaf block this renderer does not know: its source text.
		return r.raw(n.Lines(), width)
	}
	return r.children(n, width, false)
}

// raw lays out source lines as plain text, each wrapped on its own.
func (r *mdRenderer) raw(lines *text.Segments, width int) []mdLine {
	var out []mdLine
	for i := range lines.Len() {
		seg := lines.At(i)
		s := strings.TrimRight(string(seg.Value(r.src)), "\r\n")
		if s = clean(expandTabs(s)); s == "" {
			out = append(out, mdLine{})
			continue
		}
		t := inlineText{}
		t.add(mdStyle{}, s)
		out = append(out, t.wrap(width, r.st)...)
	}
	return out
}

// code lays out a code block: indented, in the code style, one line per
// source line, never wrapped.
func (r *mdRenderer) code(n ast.Node) []mdLine {
	lines := n.Lines()
	out := make([]mdLine, 0, lines.Len())
	for i := range lines.Len() {
		seg := lines.At(i)
		s := clean(expandTabs(strings.TrimRight(string(seg.Value(r.src)), "\r\n")))
		if s == "" {
			out = append(out, mdLine{code: true})
			continue
		}
		out = append(out, mdLine{text: codeIndent + r.st.codeBlock.Render(s), code: true})
	}
	return out
}

// narrower is the width left for a block nested behind a prefix of
// `by` cells, and whether there is room for the prefix at all (a width
// <= 0 means no wrapping, so there always is).
func narrower(width, by int) (int, bool) {
	if width <= 0 {
		return width, true
	}
	if width-by < minWidth {
		return width, false
	}
	return width - by, true
}

// quote draws a bar left of the quoted blocks.
func (r *mdRenderer) quote(n *ast.Blockquote, width int) []mdLine {
	inner, ok := narrower(width, 2)
	lines := r.children(n, inner, false)
	if !ok {
		return lines
	}
	bar := r.st.quote.Render("│")
	for i, l := range lines {
		if l.text == "" {
			lines[i].text = bar
			continue
		}
		lines[i].text = bar + " " + l.text
	}
	return lines
}

// list lays each item out behind its marker ("•", "◦", "▪" by depth, or
// its number), with the item's further lines indented to match; a loose
// list keeps a blank line between items.
func (r *mdRenderer) list(n *ast.List, width int) []mdLine {
	marks := make([]string, n.ChildCount())
	if n.IsOrdered() {
		digits := len(strconv.Itoa(n.Start + len(marks) - 1))
		for i := range marks {
			marks[i] = fmt.Sprintf("%*d%c", digits, n.Start+i, n.Marker)
		}
	} else {
		for i := range marks {
			marks[i] = bullets[r.bullets%len(bullets)]
		}
		r.bullets++
		defer func() { r.bullets-- }()
	}
	mw := ansi.StringWidth(marks[0]) + 1
	inner, indent := narrower(width, mw)
	pad := strings.Repeat(" ", mw)
	var out []mdLine
	i := 0
	for item := n.FirstChild(); item != nil; item, i = item.NextSibling(), i+1 {
		if !n.IsTight && len(out) > 0 {
			out = append(out, mdLine{})
		}
		lines := r.children(item, inner, n.IsTight)
		if !indent || len(lines) == 0 {
			// No room to indent (or nothing to indent): the marker on a
			// line of its own.
			var t inlineText
			t.add(mdStyle{kind: kindMarker}, marks[i])
			out = append(out, t.wrap(width, r.st)...)
			out = append(out, lines...)
			continue
		}
		marker := r.st.marker.Render(marks[i]) + " "
		for j, l := range lines {
			prefix := pad
			switch {
			case j == 0:
				prefix = marker
			case l.text == "":
				prefix = "" // no trailing spaces
			}
			out = append(out, mdLine{text: prefix + l.text, code: l.code})
		}
	}
	return out
}

// inline is n's inline content in style st.
func (r *mdRenderer) inline(n ast.Node, st mdStyle) inlineText {
	var t inlineText
	r.inlines(&t, n, st)
	return t
}

// inlines adds each of parent's inline children with its style applied
// on top of st. Styles are composed rather than nested, so each piece of
// text carries its whole style.
func (r *mdRenderer) inlines(t *inlineText, parent ast.Node, st mdStyle) {
	for c := parent.FirstChild(); c != nil; c = c.NextSibling() {
		switch n := c.(type) {
		case *ast.Text:
			v := n.Segment.Value(r.src)
			if n.IsRaw() {
				t.add(st, string(v))
			} else {
				t.add(st, unescape(v))
			}
			switch {
			case n.HardLineBreak():
				t.lineBreak()
			case n.SoftLineBreak():
				t.add(st, " ")
			}
		case *ast.String:
			t.add(st, string(n.Value))
		case *ast.CodeSpan:
			t.add(mdStyle{kind: kindCode, bold: st.bold, italic: st.italic}, r.plain(n))
		case *ast.Emphasis:
			em := st
			if n.Level >= 2 {
				em.bold = true
			} else {
				em.italic = true
			}
			r.inlines(t, n, em)
		case *ast.Link:
			r.link(t, n, st, string(n.Destination))
		case *ast.Image:
			t.add(st, "image: ")
			r.link(t, n, st, string(n.Destination))
		case *ast.AutoLink:
			t.add(mdStyle{kind: kindLink, bold: st.bold, italic: st.italic}, string(n.Label(r.src)))
		case *ast.RawHTML:
			for i := range n.Segments.Len() {
				seg := n.Segments.At(i)
				t.add(st, string(seg.Value(r.src)))
			}
		default:
			r.inlines(t, c, st)
		}
	}
}

// link writes the link's text, then its destination in parentheses
// unless the text already says it.
func (r *mdRenderer) link(t *inlineText, n ast.Node, st mdStyle, dest string) {
	label := r.inline(n, mdStyle{kind: kindLink, bold: st.bold, italic: st.italic})
	*t = append(*t, label...)
	plain := label.plain()
	dest = clean(dest)
	if dest == "" || dest == plain || dest == "mailto:"+plain {
		return
	}
	if plain != "" {
		t.add(st, " ")
	}
	t.add(mdStyle{kind: kindURL}, "("+dest+")")
}

// plain is the text of n's inline children without any markup (a code
// span's content, with its line breaks as spaces).
func (r *mdRenderer) plain(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(r.src))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		default:
			b.WriteString(r.plain(c))
		}
	}
	return b.String()
}

// clean drops control characters (escape sequences in a message must
// not drive the terminal) and turns tabs and line breaks into spaces;
// invalid UTF-8 becomes U+FFFD.
func clean(s string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case c == '\t' || c == '\n' || c == '\r':
			return ' '
		case c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0):
			return -1
		}
		return c
	}, s)
}

// expandTabs replaces tabs with spaces up to the next multiple of four
// columns (a terminal's tab stops would not match the measured widths).
func expandTabs(s string) string {
	if !strings.Contains(s, "\t") {
		return s
	}
	var b strings.Builder
	col := 0
	for _, c := range s {
		if c == '\t' {
			n := 4 - col%4
			b.WriteString(strings.Repeat(" ", n))
			col += n
			continue
		}
		b.WriteRune(c)
		col++
	}
	return b.String()
}

// unescape resolves a text node's backslash escapes and entity and
// numeric character references, as CommonMark reads them.
func unescape(v []byte) string {
	if bytes.IndexByte(v, '\\') < 0 && bytes.IndexByte(v, '&') < 0 {
		return string(v)
	}
	var b strings.Builder
	for i := 0; i < len(v); {
		c := v[i]
		if c == '\\' && i+1 < len(v) && util.IsPunct(v[i+1]) {
			b.WriteByte(v[i+1])
			i += 2
			continue
		}
		if c == '&' {
			// The longest entity name is 31 characters.
			if j := bytes.IndexByte(v[i:min(len(v), i+40)], ';'); j > 0 {
				ref := v[i : i+j+1]
				if res := util.ResolveEntityNames(util.ResolveNumericReferences(ref)); !bytes.Equal(res, ref) {
					b.Write(res)
					i += j + 1
					continue
				}
			}
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}
