package tui

import (
	"fmt"
	"strings"

	"charm.land/glamour/v2"
	"charm.land/glamour/v2/ansi"
	gstyles "charm.land/glamour/v2/styles"
)

// markdown renders completed messages with glamour, caching the output
// per message block, width and background: a completed message's content
// is final, so each is rendered once per width.
type markdown struct {
	renderers map[string]*glamour.TermRenderer // by width and style
	cache     map[string]string
}

func newMarkdown() *markdown {
	return &markdown{renderers: map[string]*glamour.TermRenderer{}, cache: map[string]string{}}
}

// reset drops the cache (the width changed).
func (md *markdown) reset() {
	clear(md.cache)
	clear(md.renderers)
}

// render returns text rendered for width; ok is false when glamour
// failed and the caller should fall back to plain text.
func (md *markdown) render(id, text string, width int, dark bool) (string, bool) {
	style := "light"
	if dark {
		style = "dark"
	}
	key := fmt.Sprintf("%s|%d|%s", id, width, style)
	if s, ok := md.cache[key]; ok {
		return s, true
	}
	rk := fmt.Sprintf("%d|%s", width, style)
	r := md.renderers[rk]
	if r == nil {
		var err error
		r, err = glamour.NewTermRenderer(glamour.WithStyles(flush(dark)), glamour.WithWordWrap(width))
		if err != nil {
			return "", false
		}
		md.renderers[rk] = r
	}
	out, err := r.Render(text)
	if err != nil {
		return "", false
	}
	out = strings.Trim(out, "\n")
	md.cache[key] = out
	return out, true
}

// flush is glamour's dark or light style without the document margin, so
// a message keeps its place when it turns from plain text to markdown.
func flush(dark bool) ansi.StyleConfig {
	cfg := gstyles.LightStyleConfig
	if dark {
		cfg = gstyles.DarkStyleConfig
	}
	var zero uint
	cfg.Document.Margin = &zero
	return cfg
}
