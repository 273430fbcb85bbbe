package tui

import (
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/yuin/goldmark/parser"
)

// markdown renders completed messages as styled terminal text, caching
// the output per message block, width and background: a completed
// message's content is final, so each is rendered once per width.
//
// It parses with goldmark's parser alone (no HTML renderer, no
// extensions) and draws with lipgloss styles (markdown_render.go);
// there is no syntax highlighting. A renderer linked into the binary
// costs every subcommand its package initialisation, `metis serve`
// included, so this one is kept small: see docs/benchmarks.md.
type markdown struct {
	parser parser.Parser // built on first use
	styles [2]*mdStyles  // light, dark; built on first use
	cache  map[string]string
}

func newMarkdown() *markdown {
	return &markdown{cache: map[string]string{}}
}

// reset drops the cache (the width changed).
func (md *markdown) reset() {
	clear(md.cache)
}

// render returns text rendered for width (no wrapping when width <= 0);
// ok is false when rendering failed and the caller should fall back to
// plain text.
func (md *markdown) render(id, text string, width int, dark bool) (string, bool) {
	style := "light"
	if dark {
		style = "dark"
	}
	key := fmt.Sprintf("%s|%d|%s", id, width, style)
	if s, ok := md.cache[key]; ok {
		return s, true
	}
	out, ok := md.renderSafely(text, width, dark)
	if !ok {
		return "", false
	}
	md.cache[key] = out
	return out, true
}

// renderSafely renders text, turning a panic in the renderer into a
// plain-text fallback: one odd message must not take the terminal down.
func (md *markdown) renderSafely(text string, width int, dark bool) (out string, ok bool) {
	defer func() {
		if recover() != nil {
			out, ok = "", false
		}
	}()
	lines := md.lines(text, width, dark)
	texts := make([]string, len(lines))
	for i, l := range lines {
		texts[i] = l.text
	}
	return strings.Join(texts, "\n"), true
}

// lines renders text into terminal lines.
func (md *markdown) lines(text string, width int, dark bool) []mdLine {
	if md.parser == nil {
		md.parser = parser.NewParser(
			parser.WithBlockParsers(parser.DefaultBlockParsers()...),
			parser.WithInlineParsers(parser.DefaultInlineParsers()...),
			parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
		)
	}
	i := 0
	if dark {
		i = 1
	}
	if md.styles[i] == nil {
		md.styles[i] = newMDStyles(dark)
	}
	r := &mdRenderer{parser: md.parser, st: md.styles[i]}
	return r.document([]byte(text), width)
}

// mdStyles are the markdown renderer's styles for one background. Text
// keeps the terminal's own foreground; the accents are 256-colour
// indexes picked per background so that they stay readable on both.
type mdStyles struct {
	heading   lipgloss.Style
	code      lipgloss.Style // inline code
	codeBlock lipgloss.Style
	link      lipgloss.Style
	url       lipgloss.Style
	quote     lipgloss.Style // the bar left of a block quote
	rule      lipgloss.Style // thematic breaks and table borders
	marker    lipgloss.Style // list bullets and numbers

	// inline holds each kind's style with bold and italic added, by
	// kind, bold, italic.
	inline [kindCount][2][2]lipgloss.Style
}

// styleKind is what a piece of inline text is, for its base style.
type styleKind uint8

const (
	kindPlain styleKind = iota
	kindHeading
	kindCode
	kindLink
	kindURL
	kindMarker
	kindRule
	kindCount
)

// mdStyle names the style of a piece of inline text: its kind, and the
// emphasis it sits in. It is a few bytes (a lipgloss.Style is hundreds),
// so a message's text can carry one per piece.
type mdStyle struct {
	kind         styleKind
	bold, italic bool
}

// style is the lipgloss style m names.
func (s *mdStyles) style(m mdStyle) lipgloss.Style {
	return s.inline[m.kind][b2i(m.bold)][b2i(m.italic)]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newMDStyles(dark bool) *mdStyles {
	c := func(darkIdx, lightIdx string) lipgloss.Style {
		if dark {
			return lipgloss.NewStyle().Foreground(lipgloss.Color(darkIdx))
		}
		return lipgloss.NewStyle().Foreground(lipgloss.Color(lightIdx))
	}
	codeBG := lipgloss.Color("254")
	if dark {
		codeBG = lipgloss.Color("236")
	}
	st := &mdStyles{
		heading:   c("39", "27").Bold(true),
		code:      c("209", "160").Background(codeBG),
		codeBlock: c("180", "94"),
		link:      c("75", "26"),
		url:       lipgloss.NewStyle().Faint(true),
		quote:     c("242", "246"),
		rule:      c("240", "250"),
		marker:    c("39", "27"),
	}
	base := [kindCount]lipgloss.Style{
		kindPlain:   lipgloss.NewStyle(),
		kindHeading: st.heading,
		kindCode:    st.code,
		kindLink:    st.link,
		kindURL:     st.url,
		kindMarker:  st.marker,
		kindRule:    st.rule,
	}
	for k, b := range base {
		for bold := range 2 {
			for italic := range 2 {
				s := b
				if bold == 1 {
					s = s.Bold(true)
				}
				if italic == 1 {
					s = s.Italic(true)
				}
				st.inline[k][bold][italic] = s
			}
		}
	}
	return st
}
