package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/message"
	"pgregory.net/rapid"
)

// TestPromptTitleCleansCommandsAndMarkdown: the title of a first prompt
// drops the demo's slash commands and markdown syntax, and is cut at a
// word with an ellipsis.
func TestPromptTitleCleansCommandsAndMarkdown(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"  fix the\n\n bug  ", "fix the bug"},
		{"/echo hello there", "hello there"},
		{"/echo **Fix** the `login` bug in [auth](http://x/y)", "Fix the login bug in auth"},
		{`/tool grep {"pattern":"x","glob":"*.go"}`, "grep x *.go"},
		{"/echo", "/echo"},
		{`/tool shell {"command":"ls -la /tmp"}`, "ls -la /tmp"},
		{`/tool write_file {"path":"notes.txt","content":"x"}`, "notes.txt"},
		{`/tool delegate {"task":"Summarise \"the\" README"}`, `Summarise "the" README`},
		{`/tool list_dir {}`, `/tool list_dir {}`},
		{"/long 40", "long answer (40)"},
		{"/long", "long answer"},
		{"/model claude-x explain the diff", "explain the diff"},
		{"# Fix the **login** bug", "Fix the login bug"},
		{"> quoted *idea* and __strong__ and ~~gone~~ text", "quoted idea and strong and gone text"},
		{"- item one\n- item two\n1. three", "item one item two three"},
		{"see [the docs](https://example.com/x) and ![img](a.png)", "see the docs and img"},
		{"run `go test` now", "run go test now"},
		{"explain\n```go\nfunc main() {}\n```\nplease", "explain please"},
		{"```\nonly code\n```", "``` only code ```"},
		{"rename my_var_name to snake_case_too", "rename my_var_name to snake_case_too"},
		{"keep \"quotes\" and {braces} in prose", "keep \"quotes\" and {braces} in prose"},
		{"2 * 3 * 4", "2 * 3 * 4"},
		{strings.Repeat("word ", 30), "word word word word word word word word word word word word…"},
		{strings.Repeat("x", 100), strings.Repeat("x", 59) + "…"},
		{"Refactor the parser, then: add tests for every edge case we found, and more", "Refactor the parser, then: add tests for every edge case we…"},
	}
	for _, c := range cases {
		if got := PromptTitle(c.in); got != c.want {
			t.Errorf("PromptTitle(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// checkTitleShape fails when a derived title is not one clean line of
// at most MaxPromptTitleRunes runes.
func checkTitleShape(t interface{ Fatalf(string, ...any) }, in, got string) {
	if !utf8.ValidString(got) || utf8.RuneCountInString(got) > MaxPromptTitleRunes {
		t.Fatalf("PromptTitle(%q) = %q: %d runes", in, got, utf8.RuneCountInString(got))
	}
	if strings.TrimSpace(got) != got || strings.Contains(got, "  ") {
		t.Fatalf("PromptTitle(%q) = %q: untrimmed space", in, got)
	}
	for _, r := range got {
		if r != ' ' && (unicode.IsSpace(r) || unicode.IsControl(r)) {
			t.Fatalf("PromptTitle(%q) = %q: holds %U", in, got, r)
		}
	}
	if (got == "") != (Title(in) == "") {
		t.Fatalf("PromptTitle(%q) = %q, but Title gives %q", in, got, Title(in))
	}
}

// TestPromptTitleProperties: whatever the prompt, the title is one
// clean line within the bound, is empty only for a prompt with nothing
// visible, invents no text (apart from the demo's /long and the
// ellipsis), and a title that fits is a fixed point; plain words are
// kept in order, cut only at a word when the first word fits.
func TestPromptTitleProperties(t *testing.T) {
	markup := rapid.SampledFrom([]string{"**", "*", "_", "__", "~~", "`", "```", "# ", "> ", "- ", "1. ", "[", "](", ")", "!", "\n", " ", "\t", "/", "{", "}", `"`, ":", "…", "é", "日本"})
	word := rapid.StringMatching(`[a-z]{1,12}`)
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOfN(rapid.OneOf(markup, word), 0, 40).Draw(t, "parts")
		in := strings.Join(parts, "")
		got := PromptTitle(in)
		checkTitleShape(t, in, got)
		if !strings.HasPrefix(strings.TrimSpace(in), "/long") {
			for _, r := range got {
				if r != ' ' && r != '…' && !strings.ContainsRune(in, r) {
					t.Fatalf("PromptTitle(%q) = %q: %q is not in the prompt", in, got, r)
				}
			}
		}
		if !strings.HasSuffix(got, "…") && Title(in) != got {
			// A title is a fixed point, unless what is left still reads
			// as markup ("****\n**" gives "** **", then "* *", then
			// "*"): then each further application shortens it, so it
			// settles.
			prev := got
			for next := PromptTitle(prev); next != prev; prev, next = next, PromptTitle(next) {
				if utf8.RuneCountInString(next) >= utf8.RuneCountInString(prev) {
					t.Fatalf("PromptTitle does not settle on %q: %q gives %q", in, prev, next)
				}
			}
		}

		words := rapid.SliceOfN(word, 1, 30).Draw(t, "words")
		plain := strings.Join(words, " ")
		got = PromptTitle(plain)
		checkTitleShape(t, plain, got)
		if !strings.HasSuffix(got, "…") {
			if got != plain {
				t.Fatalf("PromptTitle(%q) = %q, want it whole", plain, got)
			}
			return
		}
		kept := strings.TrimSuffix(got, "…")
		if !strings.HasPrefix(plain, kept) {
			t.Fatalf("PromptTitle(%q) = %q: not a prefix", plain, got)
		}
		if next := plain[len(kept)]; next != ' ' && len([]rune(words[0])) < MaxPromptTitleRunes/2 {
			t.Fatalf("PromptTitle(%q) = %q: cut inside a word", plain, got)
		}
	})
}

func FuzzPromptTitle(f *testing.F) {
	for _, s := range []string{"", "/echo hi", `/tool shell {"command":"ls"}`, "/long 9", "# **x**", "```go\nx\n```",
		"[a](b) ![c](d)", "my_var", strings.Repeat("ab ", 40), "\xff\xfe", "日本語 テキスト", "*", "__a__b__"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkTitleShape(t, s, PromptTitle(s))
	})
}

// TestSetTitleCleansAndRenameWins: the first prompt's title is stored
// clean; a title the user gives is kept as given (only Title's
// normalisation) and never replaced by a later SetTitle.
func TestSetTitleCleansAndRenameWins(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	for _, id := range []string{"sess_a", "sess_b"} {
		if err := s.Apply(ctx, CreateSession{Session: Session{ID: id, WorkspacePath: "/w"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Apply(ctx, SetTitle{SessionID: "sess_a", Title: "## Fix the **login** bug"}); err != nil {
		t.Fatal(err)
	}
	if ss, _ := s.Session(ctx, "sess_a"); ss.Title != "Fix the login bug" {
		t.Fatalf("derived title %q", ss.Title)
	}
	if err := s.Apply(ctx, Rename{SessionID: "sess_b", Title: "my **bold** name"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, SetTitle{SessionID: "sess_b", Title: "/echo first prompt"}); err != nil {
		t.Fatal(err)
	}
	if ss, _ := s.Session(ctx, "sess_b"); ss.Title != "my **bold** name" {
		t.Fatalf("renamed title %q, want the user's kept", ss.Title)
	}
}

// TestMigrateV10CleansDerivedTitles: a version 9 database's titles that
// read as their first prompt did are derived again, cleanly; a title
// the user gave stays.
func TestMigrateV10CleansDerivedTitles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v9.db")
	ctx := context.Background()
	db, err := sql.Open("sqlite", dsn(path, writerParams))
	if err != nil {
		t.Fatal(err)
	}
	raw := "/tool shell {\"command\":\"ls\"}\n\nthen **more**"
	for _, q := range []string{schemaV1, schemaV2, schemaV3, schemaV4, schemaV5, schemaV6, schemaV7, schemaV8, schemaV9, "PRAGMA user_version = 9",
		`INSERT INTO sessions (id, created_at, title) VALUES ('sess_raw', 10, '` + Title(raw) + `')`,
		`INSERT INTO sessions (id, created_at, title) VALUES ('sess_named', 10, 'my name')`,
		`INSERT INTO sessions (id, created_at) VALUES ('sess_none', 10)`,
		`INSERT INTO messages (id, session_id, role, content, created_at) VALUES ('msg_1', 'sess_raw', 'user', '` + jsonText(t, raw) + `', 10)`,
		`INSERT INTO messages (id, session_id, role, content, created_at) VALUES ('msg_2', 'sess_named', 'user', '` + jsonText(t, "# first") + `', 10)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, Options{Path: path})
	for id, want := range map[string]string{"sess_raw": PromptTitle(raw), "sess_named": "my name", "sess_none": ""} {
		ss, err := s.Session(ctx, id)
		if err != nil || ss.Title != want {
			t.Errorf("%s: title %q (%v), want %q", id, ss.Title, err, want)
		}
	}
	if PromptTitle(raw) == Title(raw) {
		t.Fatal("the raw title needs no cleaning: the test proves nothing")
	}
}

// jsonText is a message's content holding one text block, as stored,
// with SQL's quotes doubled.
func jsonText(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal([]message.Block{message.Text(s)})
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "'", "''")
}
