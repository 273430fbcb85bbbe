package tui

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// Tables. The parser is goldmark's CommonMark core without extensions
// (the extension package costs the idle server its initialisation), so
// a GFM table arrives as a paragraph. A paragraph whose first line is a
// header row and whose second is a delimiter row (`| --- | :-: |`) is
// laid out here as a table: each cell's markdown rendered inline, the
// columns padded to their widest cell and aligned as the delimiter row
// says. A table wider than the width is shown one record per block
// instead ("header: value" lines, wrapped), so nothing is cut.

type align int

const (
	alignNone align = iota
	alignLeft
	alignCenter
	alignRight
)

// table renders n as a table if its source lines are one.
func (r *mdRenderer) table(n ast.Node, width int) ([]mdLine, bool) {
	lines := n.Lines()
	if lines.Len() < 2 {
		return nil, false
	}
	row := func(i int) string {
		seg := lines.At(i)
		return strings.TrimSpace(string(seg.Value(r.src)))
	}
	delim := row(1)
	if !strings.Contains(delim, "|") {
		return nil, false
	}
	head := splitRow(row(0))
	aligns, ok := parseDelimiters(splitRow(delim))
	if !ok || len(aligns) != len(head) {
		return nil, false
	}
	rows := [][]inlineText{r.cells(head, mdStyle{bold: true})}
	for i := 2; i < lines.Len(); i++ {
		cells := splitRow(row(i))
		// GFM: missing cells are empty, extra ones are ignored.
		cells = append(cells, make([]string, max(0, len(head)-len(cells)))...)[:len(head)]
		rows = append(rows, r.cells(cells, mdStyle{}))
	}

	widths := make([]int, len(head))
	total := 3 * (len(head) - 1)
	for c := range head {
		for _, rw := range rows {
			widths[c] = max(widths[c], ansi.StringWidth(rw[c].plain()))
		}
		total += widths[c]
	}
	if width > 0 && total > width {
		return r.records(rows, width), true
	}

	sep := r.st.rule.Render(" │ ")
	out := make([]mdLine, 0, len(rows)+1)
	for i, rw := range rows {
		var b strings.Builder
		for c, cell := range rw {
			last := c == len(rw)-1
			if c > 0 && last && cell.plain() == "" {
				b.WriteString(r.st.rule.Render(" │")) // no trailing space
				continue
			}
			if c > 0 {
				b.WriteString(sep)
			}
			b.WriteString(pad(cell.line(r.st), widths[c], aligns[c], last))
		}
		out = append(out, mdLine{text: b.String()})
		if i == 0 {
			rules := make([]string, len(widths))
			for c, w := range widths {
				rules[c] = strings.Repeat("─", w)
			}
			out = append(out, mdLine{text: r.st.rule.Render(strings.Join(rules, "─┼─"))})
		}
	}
	return out, true
}

// records lays a table too wide for the width out one row per block,
// each cell on its own line behind its column's header.
func (r *mdRenderer) records(rows [][]inlineText, width int) []mdLine {
	head := rows[0]
	if len(rows) == 1 {
		var t inlineText
		for c, cell := range head {
			if c > 0 {
				t.add(mdStyle{kind: kindRule}, " │ ")
			}
			t = append(t, cell...)
		}
		return t.wrap(width, r.st)
	}
	var out []mdLine
	for i, rw := range rows[1:] {
		if i > 0 {
			out = append(out, mdLine{})
		}
		for c, cell := range rw {
			t := append(inlineText{}, head[c]...)
			if len(t) > 0 {
				t.add(mdStyle{bold: true}, ":")
				t.add(mdStyle{}, " ")
			}
			t = append(t, cell...)
			out = append(out, t.wrap(width, r.st)...)
		}
	}
	return out
}

// cells parses each cell's markdown as inline text in style st.
func (r *mdRenderer) cells(cells []string, st mdStyle) []inlineText {
	out := make([]inlineText, len(cells))
	for i, c := range cells {
		sub := &mdRenderer{parser: r.parser, st: r.st, src: []byte(c)}
		doc := r.parser.Parse(text.NewReader(sub.src))
		if p, ok := doc.FirstChild().(*ast.Paragraph); ok && p.NextSibling() == nil {
			out[i] = sub.inline(p, st)
			continue
		}
		// Not inline text (a cell such as "# x" or "- x"): as written.
		out[i].add(st, c)
	}
	return out
}

// pad pads a rendered cell to w cells as aligned; a left-aligned last
// cell is not padded (no trailing spaces).
func pad(cell string, w int, a align, last bool) string {
	gap := w - ansi.StringWidth(cell)
	if gap <= 0 {
		return cell
	}
	switch a {
	case alignRight:
		return strings.Repeat(" ", gap) + cell
	case alignCenter:
		left := gap / 2
		return strings.Repeat(" ", left) + cell + strings.Repeat(" ", gap-left)
	}
	if last {
		return cell
	}
	return cell + strings.Repeat(" ", gap)
}

// splitRow splits a table row into its trimmed cells at the pipes that
// are not escaped, without the optional outer pipes; an escaped pipe
// stands for a pipe in the cell.
func splitRow(s string) []string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "|")
	if strings.HasSuffix(s, "|") && !strings.HasSuffix(s, `\|`) {
		s = s[:len(s)-1]
	}
	var cells []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '|':
			cells = append(cells, s[start:i])
			start = i + 1
		}
	}
	cells = append(cells, s[start:])
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(strings.TrimSpace(c), `\|`, "|")
	}
	return cells
}

// parseDelimiters reads a delimiter row's cells (`---`, `:--`, `--:`,
// `:-:`) as column alignments; ok is false if a cell is anything else.
func parseDelimiters(cells []string) ([]align, bool) {
	aligns := make([]align, len(cells))
	for i, c := range cells {
		left, right := strings.HasPrefix(c, ":"), strings.HasSuffix(c, ":")
		dashes := strings.TrimSuffix(strings.TrimPrefix(c, ":"), ":")
		if dashes == "" || strings.Trim(dashes, "-") != "" {
			return nil, false
		}
		switch {
		case left && right:
			aligns[i] = alignCenter
		case right:
			aligns[i] = alignRight
		case left:
			aligns[i] = alignLeft
		}
	}
	return aligns, true
}
