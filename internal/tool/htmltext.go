package tool

import (
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlToMarkdown renders an HTML tree (the readable part of a page) as
// Markdown: headings, paragraphs, lists, links, emphasis, code, quotes
// and simple tables; scripts, styles and forms are dropped. Relative
// links are resolved against base.
func htmlToMarkdown(n *html.Node, base *url.URL) string {
	r := &mdRenderer{base: base}
	r.block(n)
	r.flush()
	out := strings.TrimSpace(r.out.String())
	// At most one blank line in a row.
	for strings.Contains(out, "\n\n\n") {
		out = strings.ReplaceAll(out, "\n\n\n", "\n\n")
	}
	return out + "\n"
}

type mdRenderer struct {
	base   *url.URL
	out    strings.Builder
	inline strings.Builder // the paragraph being built
	prefix string          // list indentation and quote marks of the current block
	mark   string          // a list item's mark, written before its first text
	lists  []listState
}

type listState struct {
	ordered bool
	n       int
}

// flush ends the current paragraph.
func (r *mdRenderer) flush() {
	text := strings.TrimSpace(collapseSpaces(r.inline.String()))
	r.inline.Reset()
	if text == "" {
		return
	}
	for i, l := range strings.Split(text, "\n") {
		if i > 0 {
			r.out.WriteByte('\n')
		}
		r.out.WriteString(r.prefix)
		if i == 0 {
			r.out.WriteString(r.mark)
		} else {
			r.out.WriteString(strings.Repeat(" ", len(r.mark)))
		}
		r.out.WriteString(strings.TrimSpace(l))
	}
	r.mark = ""
	r.out.WriteString("\n\n")
}

// collapseSpaces turns runs of white space into one space, keeping the
// line breaks <br> made (marked "\x00").
func collapseSpaces(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(strings.ReplaceAll(s, " \x00 ", "\n"), "\x00", "\n")
}

func skipped(a atom.Atom) bool {
	switch a {
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Svg, atom.Iframe, atom.Form, atom.Button,
		atom.Input, atom.Select, atom.Textarea, atom.Nav, atom.Head, atom.Object, atom.Canvas:
		return true
	}
	return false
}

// block renders n's children as blocks.
func (r *mdRenderer) block(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		r.node(c)
	}
}

func (r *mdRenderer) node(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		r.inline.WriteString(n.Data)
		return
	case html.ElementNode:
	case html.DocumentNode:
		r.block(n)
		return
	default:
		return
	}
	if skipped(n.DataAtom) {
		return
	}
	switch n.DataAtom {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		r.flush()
		level := int(n.Data[1] - '0')
		r.inline.WriteString(strings.Repeat("#", level) + " ")
		r.block(n)
		r.flush()
	case atom.P, atom.Div, atom.Section, atom.Article, atom.Header, atom.Footer, atom.Main, atom.Aside,
		atom.Figure, atom.Figcaption, atom.Dl, atom.Dt, atom.Dd, atom.Details, atom.Summary, atom.Body, atom.Html, atom.Address:
		r.flush()
		r.block(n)
		r.flush()
	case atom.Br:
		r.inline.WriteString("\x00")
	case atom.Hr:
		r.flush()
		r.out.WriteString(r.prefix + "---\n\n")
	case atom.Pre:
		r.flush()
		var sb strings.Builder
		textOf(n, &sb)
		code := strings.Trim(sb.String(), "\n")
		r.out.WriteString(r.prefix + "```\n")
		for _, l := range strings.Split(code, "\n") {
			r.out.WriteString(r.prefix + l + "\n")
		}
		r.out.WriteString(r.prefix + "```\n\n")
	case atom.Code, atom.Kbd, atom.Samp, atom.Tt:
		var sb strings.Builder
		textOf(n, &sb)
		if t := strings.TrimSpace(sb.String()); t != "" {
			r.inline.WriteString("`" + t + "`")
		}
	case atom.Strong, atom.B:
		r.wrap(n, "**")
	case atom.Em, atom.I:
		r.wrap(n, "*")
	case atom.A:
		r.link(n)
	case atom.Img:
		if alt := strings.TrimSpace(attr(n, "alt")); alt != "" {
			r.inline.WriteString("[image: " + alt + "]")
		}
	case atom.Ul, atom.Ol:
		r.flush()
		r.lists = append(r.lists, listState{ordered: n.DataAtom == atom.Ol})
		r.block(n)
		r.lists = r.lists[:len(r.lists)-1]
		r.flush()
		if len(r.lists) == 0 && strings.HasSuffix(r.out.String(), "\n") && !strings.HasSuffix(r.out.String(), "\n\n") {
			r.out.WriteString("\n") // a blank line after a top-level list
		}
	case atom.Li:
		r.flush()
		mark := "- "
		if k := len(r.lists); k > 0 && r.lists[k-1].ordered {
			r.lists[k-1].n++
			mark = itoa(r.lists[k-1].n) + ". "
		}
		indent := strings.Repeat("  ", max(0, len(r.lists)-1))
		saved := r.prefix
		r.mark, r.prefix = mark, saved+indent
		r.block(n)
		r.flushTight()
		r.mark, r.prefix = "", saved
	case atom.Blockquote:
		r.flush()
		saved := r.prefix
		r.prefix += "> "
		r.block(n)
		r.flush()
		r.prefix = saved
	case atom.Table:
		r.flush()
		r.table(n)
	default:
		r.block(n)
	}
}

// flushTight ends a list item without a blank line after it.
func (r *mdRenderer) flushTight() {
	r.flush()
	s := r.out.String()
	if strings.HasSuffix(s, "\n\n") {
		r.out.Reset()
		r.out.WriteString(s[:len(s)-1])
	}
}

func (r *mdRenderer) wrap(n *html.Node, mark string) {
	var sub mdRenderer
	sub.base = r.base
	sub.block(n)
	if t := strings.TrimSpace(sub.inline.String()); t != "" {
		r.inline.WriteString(" " + mark + t + mark + " ")
	}
}

func (r *mdRenderer) link(n *html.Node) {
	var sub mdRenderer
	sub.base = r.base
	sub.block(n)
	text := strings.TrimSpace(collapseSpaces(sub.inline.String()))
	href := strings.TrimSpace(attr(n, "href"))
	u, err := url.Parse(href)
	if text == "" || href == "" || err != nil || strings.HasPrefix(strings.ToLower(href), "javascript:") || href[0] == '#' {
		r.inline.WriteString(text)
		return
	}
	if r.base != nil {
		u = r.base.ResolveReference(u)
	}
	r.inline.WriteString("[" + text + "](" + u.String() + ")")
}

// table renders rows as "| a | b |" lines.
func (r *mdRenderer) table(n *html.Node) {
	var rows [][]string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			if c.DataAtom == atom.Tr {
				var cells []string
				for td := c.FirstChild; td != nil; td = td.NextSibling {
					if td.Type == html.ElementNode && (td.DataAtom == atom.Td || td.DataAtom == atom.Th) {
						var sb strings.Builder
						textOf(td, &sb)
						cells = append(cells, strings.ReplaceAll(strings.Join(strings.Fields(sb.String()), " "), "|", "\\|"))
					}
				}
				rows = append(rows, cells)
				continue
			}
			walk(c)
		}
	}
	walk(n)
	for i, row := range rows {
		r.out.WriteString(r.prefix + "| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			r.out.WriteString(r.prefix + "|" + strings.Repeat(" --- |", len(row)) + "\n")
		}
	}
	r.out.WriteString("\n")
}

// textOf appends the text below n (scripts and styles left out).
func textOf(n *html.Node, sb *strings.Builder) {
	if n.Type == html.TextNode {
		sb.WriteString(n.Data)
		return
	}
	if n.Type == html.ElementNode && skipped(n.DataAtom) {
		return
	}
	if n.Type == html.ElementNode && n.DataAtom == atom.Br {
		sb.WriteString("\n")
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		textOf(c, sb)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
