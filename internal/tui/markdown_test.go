package tui

import (
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// stripped renders src at width on a dark background and returns the
// text without its styles.
func stripped(t *testing.T, src string, width int) string {
	t.Helper()
	out, ok := newMarkdown().render("m/0", src, width, true)
	if !ok {
		t.Fatalf("render failed for %q", src)
	}
	return ansi.Strip(out)
}

func TestMarkdownRendersEachConstruct(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   string
		width int
		want  string
	}{
		{"atx heading", "# Title\n\n### Third *level*", 40, "# Title\n\n### Third level"},
		{"setext heading", "Title\n=====\n\nSub\n---", 40, "# Title\n\n## Sub"},
		{"paragraph joins soft breaks", "one\ntwo\nthree", 40, "one two three"},
		{"paragraphs apart", "one\n\ntwo", 40, "one\n\ntwo"},
		{"paragraph wraps at words", "one two three four five six", 10, "one two\nthree four\nfive six"},
		{"a word longer than the width is cut", "abcdefghijklmno", 10, "abcdefghij\nklmno"},
		{"a hyphen is not a break point", "00000 - abcde -x", 5, "00000\n-\nabcde\n-x"},
		{"wide characters wrap by cells", "日本語の テキスト", 6, "日本語\nの\nテキス\nト"},
		{"hard line break", "one  \ntwo\\\nthree", 40, "one\ntwo\nthree"},
		{"emphasis and strong", "*a* _b_ **c** __d__ ***e***", 40, "a b c d e"},
		{"inline code", "run `go test ./...` now", 40, "run go test ./... now"},
		{"inline code keeps backslashes", "`a\\*b`", 40, `a\*b`},
		{"escapes and references", `\*not emphasis\* &amp; &copy; &#35;`, 40, "*not emphasis* & © #"},
		{"fenced code", "```go\nfunc main() {\n\tx := 1\n}\n```", 40, "  func main() {\n      x := 1\n  }"},
		{"fenced code keeps blank lines", "~~~\na\n\nb\n~~~", 40, "  a\n\n  b"},
		{"code is not wrapped", "```\n" + strings.Repeat("x", 30) + "\n```", 10, "  " + strings.Repeat("x", 30)},
		{"indented code", "    a := 1\n    b := 2", 40, "  a := 1\n  b := 2"},
		{"bullet list", "- one\n- two\n* three", 40, "• one\n• two\n\n• three"},
		{"nested bullet lists", "- a\n  - b\n    - c\n      - d\n- e", 40, "• a\n  ◦ b\n    ▪ c\n      • d\n• e"},
		{"ordered list", "1. one\n2. two\n3. three", 40, "1. one\n2. two\n3. three"},
		{"ordered list numbers align", "9. nine\n10. ten", 40, " 9. nine\n10. ten"},
		{"ordered list keeps its start and marker", "3) c\n4) d", 40, "3) c\n4) d"},
		{"ordered inside bullet", "- a\n  1. x\n  2. y\n- b", 40, "• a\n  1. x\n  2. y\n• b"},
		{"loose list", "- a\n\n- b", 40, "• a\n\n• b"},
		{"list item with two paragraphs", "1. first\n\n   second\n2. next", 40, "1. first\n\n   second\n\n2. next"},
		{"list item wraps under its text", "- one two three four", 10, "• one two\n  three\n  four"},
		{"list item holding code", "- run:\n\n  ```\n  make\n  ```", 40, "• run:\n\n    make"},
		{"block quote", "> quoted\n> text", 40, "│ quoted text"},
		{"block quote wraps inside its bar", "> one two three four", 10, "│ one two\n│ three\n│ four"},
		{"nested block quote", "> a\n>\n> > b", 40, "│ a\n│\n│ │ b"},
		{"list in a block quote", "> - a\n> - b", 40, "│ • a\n│ • b"},
		{"link shows its url", "see [the docs](https://example.com/docs)", 40, "see the docs (https://example.com/docs)"},
		{"link whose text is its url", "[https://a.example](https://a.example)", 40, "https://a.example"},
		{"autolink", "<https://example.com> <me@example.com>", 40, "https://example.com me@example.com"},
		{"image", "![a cat](cat.png)", 40, "image: a cat (cat.png)"},
		{"long url is cut to the width", "[x](https://example.com/abcdefghij)", 12, "x\n(https://exa\nmple.com/abc\ndefghij)"},
		{"thematic break spans the width", "a\n\n---\n\nb", 10, "a\n\n──────────\n\nb"},
		{"table", "| name | size |\n| :--- | ---: |\n| a | 1 |\n| bb | `22` |", 40,
			"name │ size\n─────┼─────\na    │    1\nbb   │   22"},
		{"table without outer pipes, centred", "a | b\n:-: | -\nxxx | \\| y", 40, " a  │ b\n────┼────\nxxx │ | y"},
		{"table with missing and extra cells", "| a | b |\n|---|---|\n| 1 |\n| 2 | 3 | 4 |", 40, "a │ b\n──┼──\n1 │\n2 │ 3"},
		{"table wider than the width: one record per block", "| name | note |\n|---|---|\n| a | long note here |\n| b | c |", 16,
			"name: a\nnote: long note\nhere\n\nname: b\nnote: c"},
		{"not a table without a delimiter row", "a | b\nc | d", 40, "a | b c | d"},
		{"html block as written", "<div>\n  hi\n</div>", 40, "<div>\n  hi\n</div>"},
		{"inline html as written", "a <b>bold</b> c", 40, "a <b>bold</b> c"},
		{"control characters dropped", "a\x1b[31mb\x07c\u009bd", 40, "a[31mbcd"},
		{"tabs become spaces", "a\tb", 40, "a b"},
		{"blocks are a blank line apart", "# T\npara\n> q\n- i\n```\nc\n```\n***", 20,
			"# T\n\npara\n\n│ q\n\n• i\n\n  c\n\n" + strings.Repeat("─", 20)},
		{"empty", "", 40, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stripped(t, tc.src, tc.width); got != tc.want {
				t.Errorf("render(%q, %d):\n%s\nwant:\n%s\n(got %q)", tc.src, tc.width, got, tc.want, got)
			}
		})
	}
}

// TestMarkdownStylesTheConstructs checks that each construct carries its
// own style: the stripped test above cannot tell bold from plain.
func TestMarkdownStylesTheConstructs(t *testing.T) {
	for _, dark := range []bool{true, false} {
		st := newMDStyles(dark)
		for _, tc := range []struct {
			src  string
			want string
		}{
			{"*it*", lipgloss.NewStyle().Italic(true).Render("it")},
			{"**bold**", lipgloss.NewStyle().Bold(true).Render("bold")},
			{"*a **b***", lipgloss.NewStyle().Italic(true).Bold(true).Render("b")},
			{"**x `code` y**", st.code.Bold(true).Render("code")},
			{"## [link](http://u)", st.link.Bold(true).Render("link")},
			{"x `code` y", st.code.Render("code")},
			{"## Head", st.heading.Render("Head")},
			{"```\ncode line\n```", codeIndent + st.codeBlock.Render("code line")},
			{"[text](http://u)", st.link.Render("text")},
			{"[text](http://u)", st.url.Render("(http://u)")},
			{"> q", st.quote.Render("│") + " q"},
			{"- item", st.marker.Render("•") + " item"},
			{"---", st.rule.Render(strings.Repeat("─", 40))},
		} {
			out, _ := newMarkdown().render("m/0", tc.src, 40, dark)
			if !strings.Contains(out, tc.want) {
				t.Errorf("dark=%v: %q renders as %q, want it to contain %q", dark, tc.src, out, tc.want)
			}
		}
	}
}

func TestMarkdownDarkAndLightDiffer(t *testing.T) {
	src := "# T\n\n`code` and [a](http://b)\n\n```\nblock\n```"
	md := newMarkdown()
	dark, _ := md.render("m/0", src, 40, true)
	light, _ := md.render("m/0", src, 40, false)
	if dark == light {
		t.Fatal("the dark and light renderings are the same")
	}
	if ansi.Strip(dark) != ansi.Strip(light) {
		t.Fatalf("the text differs between backgrounds:\n%s\n%s", ansi.Strip(dark), ansi.Strip(light))
	}
}

func TestMarkdownCachesPerBlockWidthAndBackground(t *testing.T) {
	md := newMarkdown()
	first, _ := md.render("m/0", "one two three", 40, true)
	// The cache answers for the same block, width and background, even
	// if the text passed differs (a completed block's text is final).
	if again, _ := md.render("m/0", "something else", 40, true); again != first {
		t.Fatalf("cached %q, got %q", first, again)
	}
	if narrow, _ := md.render("m/0", "one two three", 8, true); ansi.Strip(narrow) != "one two\nthree" {
		t.Fatalf("another width is rendered again: %q", narrow)
	}
	if other, _ := md.render("m/1", "other", 40, true); other != "other" {
		t.Fatalf("another block: %q", other)
	}
	if len(md.cache) != 3 {
		t.Fatalf("%d cache entries, want 3", len(md.cache))
	}
	md.reset()
	if len(md.cache) != 0 {
		t.Fatal("reset kept the cache")
	}
	if s, _ := md.render("m/0", "something else", 40, true); s != "something else" {
		t.Fatalf("after reset: %q", s)
	}
}

// mdSample holds every construct, for the width tests.
const mdSample = "# A heading long enough to need wrapping at narrow widths\n\n" +
	"A paragraph with *emphasis*, **strong text**, `inline code spans`, a [link to somewhere](https://example.com/a/rather/long/path/to/wrap) " +
	"and a verylongwordthatdoesnotfitanywhere, then\nsoft\nbreaks.\n\n" +
	"- a bullet item that is long enough to wrap\n  - a nested item, also long enough to wrap\n    1. ordered inside\n    2. and another one here\n- last\n\n" +
	"10. ten\n11. eleven, with more words to wrap around\n\n" +
	"> a quote that wraps inside its bar\n> > and a nested quote that wraps too\n\n" +
	"```go\nfunc main() { fmt.Println(\"a code line wider than most widths\") }\n```\n\n" +
	"    indented code, also wider than most widths\n\n" +
	"---\n\n" +
	"| column | another column |\n|---|:-:|\n| a cell | `code` in a cell |\n\n" +
	"<div>an html block that is long enough to wrap</div>\n\n" +
	"Wide: 日本語のテキストと絵文字 🎉🎉🎉 mixed in.\n"

func TestMarkdownFitsTheWidth(t *testing.T) {
	for width := 2; width <= 100; width++ {
		lines := newMarkdown().lines(mdSample, width, true)
		code := 0
		for _, l := range lines {
			if l.code {
				code++
				continue
			}
			if w := ansi.StringWidth(l.text); w > width {
				t.Fatalf("width %d: a line of %d cells: %q", width, w, ansi.Strip(l.text))
			}
		}
		if code != 2 {
			t.Fatalf("width %d: %d code lines, want 2 (never wrapped)", width, code)
		}
	}
}

func TestMarkdownWithoutWidthDoesNotWrap(t *testing.T) {
	long := strings.Repeat("word ", 50)
	if got := stripped(t, long, 0); got != strings.TrimSpace(long) {
		t.Fatalf("got %q", got)
	}
}

func FuzzMarkdown(f *testing.F) {
	for _, s := range []string{
		mdSample,
		"",
		"> > > > > > > > > > deep",
		"- - - - - - - - - - deep",
		"1. 2. 3. 4. 5. 6. 7. 8. deep",
		"| a |\n|---|\n| 日本語 |",
		"`x\ny`",
		"[a](<b c>)\n\n[ref]\n\n[ref]: http://x",
		"\t\tcode\twith\ttabs",
		"a\x1b]8;;http://x\x07link\x1b]8;;\x07",
		"&#0; &#x1b; &bogus; \\",
		"***\n___\n- - -",
		"<!-- c -->\n<?php x ?>\n<![CDATA[ y ]]>",
		"\xff\xfe invalid utf-8",
	} {
		f.Add(s, uint8(40))
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, src string, w uint8) {
		width := 2 + int(w)%150
		// lines, not render: a panic must fail the test, not fall back.
		for _, l := range newMarkdown().lines(src, width, w%2 == 0) {
			plain := ansi.Strip(l.text)
			if strings.ContainsFunc(plain, func(c rune) bool { return c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) }) {
				t.Fatalf("a control character reaches the terminal: %q", l.text)
			}
			if l.code {
				continue
			}
			if sw := ansi.StringWidth(l.text); sw > width {
				t.Fatalf("width %d: a line of %d cells: %q", width, sw, plain)
			}
		}
	})
}

// BenchmarkMarkdown renders a long answer (the sample, 20 times over)
// once, as a completed message is on its first frame at a new width.
func BenchmarkMarkdown(b *testing.B) {
	src := strings.Repeat(mdSample+"\n", 20)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		newMarkdown().lines(src, 100, true)
	}
}
