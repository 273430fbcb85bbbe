package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/model"
)

// EditFile replaces an exact string in a workspace file (edit_file).
type EditFile struct{}

// Spec implements Tool.
func (EditFile) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "edit_file",
		Description: "Replace text in an existing file of the workspace. old_string must match the file exactly (whitespace, indentation and line breaks included) and occur exactly once; " +
			"include enough surrounding lines to make it unique, or set replace_all to change every occurrence. " +
			"Line endings (LF or CRLF) follow the file's. To create a file or rewrite it whole, use write_file.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"file relative to the workspace"},` +
			`"old_string":{"type":"string","description":"the exact text to replace"},` +
			`"new_string":{"type":"string","description":"the text to put in its place"},` +
			`"replace_all":{"type":"boolean","description":"replace every occurrence (default false: old_string must be unique)"}},` +
			`"required":["path","old_string","new_string"]}`)}
}

// Kind implements Classified.
func (EditFile) Kind() Kind { return KindEdit }

type editInput struct {
	Path       string  `json:"path"`
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all"`
}

func (in *editInput) check() (string, error) {
	switch {
	case in.Path == "":
		return "", Errorf(ClassInvalidInput, "path is required")
	case in.OldString == nil:
		return "", Errorf(ClassInvalidInput, "old_string is required")
	case in.NewString == nil:
		return "", Errorf(ClassInvalidInput, "new_string is required")
	case *in.OldString == "":
		return "", Errorf(ClassInvalidInput, "old_string is empty: give the exact text to replace (to create a file, use write_file)")
	case *in.OldString == *in.NewString:
		return "", Errorf(ClassInvalidInput, "old_string and new_string are the same: there is nothing to change")
	case len(*in.OldString) > MaxEditBytes || len(*in.NewString) > MaxEditBytes:
		return "", Errorf(ClassInvalidInput, "old_string and new_string are limited to %d bytes each", MaxEditBytes)
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(in.Path, "/") {
		return "", Errorf(ClassInvalidInput, "%s names a directory; edit_file edits files", in.Path)
	}
	return p, nil
}

// parseEdit decodes and checks an edit_file input; it returns the
// cleaned path.
func parseEdit(input json.RawMessage) (editInput, string, error) {
	var in editInput
	if err := decodeInput(input, &in); err != nil {
		return in, "", err
	}
	p, err := in.check()
	return in, p, err
}

// Targets implements Targeted: the file the call edits.
func (EditFile) Targets(input json.RawMessage) ([]string, error) {
	_, p, err := parseEdit(input)
	if err != nil {
		return nil, err
	}
	return []string{p}, nil
}

// editPlan is an edit computed but not yet written.
type editPlan struct {
	path     string // resolved, workspace-relative
	clean    string // as the model named it, cleaned
	display  string // as the model named it
	old, new []byte
	st       os.FileInfo
	lines    []int // 1-based line of each replaced occurrence
	first    int   // 1-based first line of the replacement in the new file
	newLines int   // lines of the replacement text
	// fromEditor: old is the editor's text; why: why the editor could
	// not give it.
	fromEditor bool
	why        string
}

// plan computes the edit. The file is checked and read on disk; with an
// editor that offers to read it (editorfs.go), the edit is made to the
// editor's text instead (its unsaved changes included), and fromEditor
// is set (why says why not, when the editor could not serve it).
func (e EditFile) plan(ctx context.Context, env Env, input json.RawMessage) (*editPlan, error) {
	in, p, err := parseEdit(input)
	if err != nil {
		return nil, err
	}
	pl := &editPlan{display: in.Path, clean: p}
	if pl.path, err = resolveFile(env, p, in.Path); err != nil {
		return nil, err
	}
	if pl.old, pl.st, err = readTextFile(env, pl.path, in.Path); err != nil {
		return nil, err
	}
	if editorCaps(env).ReadTextFile {
		text, why, ok := editorRead(ctx, env, pl.path)
		if ok {
			pl.old, pl.fromEditor = []byte(text), true
		} else {
			pl.why = why
		}
	}
	if isBinary(pl.old) {
		return nil, Errorf(ClassInvalidInput, "%s looks binary (it holds NUL bytes); edit_file edits text files", in.Path)
	}
	// A file that is not UTF-8 is taken as Latin-1 (each byte one
	// character), matched in that reading and written back in it.
	latin1 := !utf8.Valid(pl.old)
	text := string(pl.old)
	if latin1 {
		text = decodeLatin1(pl.old)
	}
	oldS, newS, n := matchEdit(text, *in.OldString, *in.NewString)
	switch {
	case n == 0:
		return nil, Errorf(ClassInvalidInput, "%s", notFoundMessage(in.Path, text, *in.OldString))
	case n > 1 && !in.ReplaceAll:
		return nil, Errorf(ClassInvalidInput, "old_string occurs %d times in %s, at lines %s; include more of the surrounding lines to pick one, or set replace_all to replace every occurrence",
			n, in.Path, lineList(occurrenceLines(text, oldS, 20)))
	}
	pl.lines = occurrenceLines(text, oldS, -1)
	limit := 1
	if in.ReplaceAll {
		limit = -1
	}
	out := strings.Replace(text, oldS, newS, limit)
	if latin1 {
		b, bad, ok := encodeLatin1(out)
		if !ok {
			return nil, Errorf(ClassInvalidInput, "%s is not UTF-8 (it is read as Latin-1), and new_string holds %q, which Latin-1 cannot hold", in.Path, bad)
		}
		pl.new = b
	} else {
		pl.new = []byte(out)
	}
	if len(pl.new) > MaxEditBytes {
		return nil, Errorf(ClassInvalidInput, "the edited file would be %d bytes; the limit is %d", len(pl.new), MaxEditBytes)
	}
	pl.first = pl.lines[0]
	pl.newLines = strings.Count(newS, "\n") + 1
	return pl, nil
}

// Preview implements Previewer.
func (e EditFile) Preview(ctx context.Context, env Env, input json.RawMessage) (Change, error) {
	pl, err := e.plan(ctx, env, input)
	if err != nil {
		return Change{}, err
	}
	return *newChange(fileDiff{Path: pl.clean, Old: pl.old, New: pl.new}), nil
}

// Run implements Tool.
func (e EditFile) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	pl, err := e.plan(ctx, env, input)
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	caps := editorCaps(env)
	if !caps.ReadTextFile && !caps.WriteTextFile {
		return e.commit(env, pl)
	}
	// Through the editor only an edit made to its own text: one made to
	// the disk's would undo the buffer's unsaved changes.
	why := pl.why
	switch {
	case !caps.ReadTextFile:
		why = "the editor does not offer to read files"
	case !caps.WriteTextFile:
		why = "the editor does not offer to write files"
	case pl.fromEditor:
		w, ok := editorWrite(ctx, env, pl.path, string(pl.new))
		if ok {
			return e.synced(env, pl)
		}
		why = w
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		// The editor did not take the edit made to its text: make it
		// to the file on disk instead.
		env.Editor = nil
		if pl, err = e.plan(ctx, env, input); err != nil {
			return Result{}, err
		}
	}
	if pl.fromEditor {
		// Read through the editor, which does not offer to write.
		env.Editor = nil
		if pl, err = e.plan(ctx, env, input); err != nil {
			return Result{}, err
		}
	}
	res, err := e.commit(env, pl)
	return viaDisk(res, why), err
}

// commit writes the edit on disk, unless the file changed since it was
// read.
func (e EditFile) commit(env Env, pl *editPlan) (Result, error) {
	if !sameFile(env, pl.path, pl.st) {
		return Result{}, Errorf(ClassExecution, "edit %s: %v", pl.display, errChanged)
	}
	if err := replaceFile(env, pl.path, pl.new, pl.st); err != nil {
		return Result{}, fsError("edit", pl.display, err)
	}
	return pl.result(""), nil
}

// synced completes an edit the editor took: when the editor did not
// save it (the disk still holds the file as it was read), the server
// writes it on disk too, so that every client, the checkpoints and
// later reads see the same file.
func (e EditFile) synced(env Env, pl *editPlan) (Result, error) {
	note := ""
	disk, _, err := readTextFile(env, pl.path, pl.display)
	switch {
	case err == nil && string(disk) == string(pl.new):
	case sameFile(env, pl.path, pl.st):
		if err := replaceFile(env, pl.path, pl.new, pl.st); err != nil {
			return Result{}, fmt.Errorf("the editor holds the edit, but writing it on disk failed: %w", fsError("edit", pl.display, err))
		}
		note = "; the editor did not save it, so the server wrote it on disk"
	default:
		note = "; the editor did not save it, and the file on disk changed meanwhile: only the editor holds the edit"
	}
	res := pl.result(note)
	first, rest, _ := strings.Cut(res.Content, "\n")
	res.Content = first + " (through the editor)"
	if rest != "" {
		res.Content += "\n" + rest
	}
	return viaEditor(res), nil
}

// result is the result of a written edit.
func (pl *editPlan) result(note string) Result {
	what := "1 occurrence at line"
	if len(pl.lines) > 1 {
		what = fmt.Sprintf("%d occurrences at lines", len(pl.lines))
	}
	sum := fmt.Sprintf("edited %s: replaced %s %s", pl.clean, what, lineList(pl.lines[:min(len(pl.lines), 20)])) + note
	content := sum
	if len(pl.lines) == 1 {
		content += "\n" + snippet(pl.new, pl.first-2, pl.first+pl.newLines+1)
	}
	return Result{Content: content, Summary: sum, Change: newChange(fileDiff{Path: pl.clean, Old: pl.old, New: pl.new})}
}

// matchEdit finds old in text. When the file's lines end in CRLF, the
// strings are matched and replaced with CRLF line ends (a model sends
// LF whatever the file holds); in an LF file CRLF in the strings becomes
// LF. If that finds nothing, the strings are tried as given (a file with
// mixed line ends). It returns the strings used and the count.
func matchEdit(text, old, new string) (string, string, int) {
	crlf := strings.Count(text, "\r\n")
	lf := strings.Count(text, "\n")
	norm := func(s string) string {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		if crlf > 0 && crlf*2 >= lf {
			s = strings.ReplaceAll(s, "\n", "\r\n")
		}
		return s
	}
	if o := norm(old); o != "" {
		if n := strings.Count(text, o); n > 0 {
			return o, norm(new), n
		}
	}
	return old, new, strings.Count(text, old)
}

// occurrenceLines returns the 1-based line of each occurrence of s in
// text (at most max of them; max < 0 for all).
func occurrenceLines(text, s string, max int) []int {
	var out []int
	line, pos := 1, 0
	for max < 0 || len(out) < max {
		i := strings.Index(text[pos:], s)
		if i < 0 {
			break
		}
		line += strings.Count(text[pos:pos+i], "\n")
		out = append(out, line)
		line += strings.Count(s, "\n")
		pos += i + len(s)
	}
	return out
}

// lineList formats line numbers: "4", "4 and 17", "4, 17 and 40".
func lineList(ls []int) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = fmt.Sprint(l)
	}
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// snippet returns the lines from..to (1-based, clamped) of b, numbered.
func snippet(b []byte, from, to int) string {
	lines := strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
	if len(lines) > 1 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the file's final line end
	}
	from, to = max(from, 1), min(to, len(lines))
	if to-from > 40 {
		to = from + 40
	}
	var sb strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&sb, "%6d\t%s\n", i, truncateLine(lines[i-1], 300))
	}
	return sb.String()
}

// truncateLine cuts a line longer than n bytes (on a rune boundary).
func truncateLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Limits of the search for the lines nearest a string that was not
// found: the file lines scanned and the string's lines compared.
const (
	nearScanLines = 50_000
	nearOldLines  = 50
)

// notFoundMessage explains that old was not found in text and shows the
// lines nearest it, so the model can copy them exactly.
func notFoundMessage(display, text, old string) string {
	lines := strings.Split(text, "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	want := strings.Split(strings.ReplaceAll(old, "\r\n", "\n"), "\n")
	// Leading and trailing blank lines say little about where it is.
	for len(want) > 1 && strings.TrimSpace(want[0]) == "" {
		want = want[1:]
	}
	for len(want) > 1 && strings.TrimSpace(want[len(want)-1]) == "" {
		want = want[:len(want)-1]
	}
	tail := "old_string must match the file exactly, whitespace and line breaks included; read the file again if it may have changed."
	k := len(want)
	// The same text with other whitespace?
	if k <= len(lines) {
		for i := 0; i+k <= min(len(lines), nearScanLines); i++ {
			ok := true
			for j := range k {
				if strings.Join(strings.Fields(lines[i+j]), " ") != strings.Join(strings.Fields(want[j]), " ") {
					ok = false
					break
				}
			}
			if ok {
				return fmt.Sprintf("old_string was not found in %s, but lines %d-%d match it when whitespace is ignored:\n%s%s",
					display, i+1, i+k, numbered(lines, i, i+k), "Copy those lines exactly, with their indentation. "+tail)
			}
		}
	}
	// Otherwise the window of k lines most like it.
	bestAt, ok := mostSimilar(lines, want)
	if !ok {
		return fmt.Sprintf("old_string was not found in %s (%d lines), and no line of the file resembles its first lines. %s", display, strings.Count(text, "\n"), tail)
	}
	end := min(bestAt+max(k, 1), len(lines), bestAt+30)
	return fmt.Sprintf("old_string was not found in %s. The most similar lines are %d-%d:\n%s%s", display, bestAt+1, end, numbered(lines, bestAt, end), tail)
}

// mostSimilar returns where the window of lines most like pattern
// starts (scoring its first nearOldLines lines, among the first
// nearScanLines of the file), and false if nothing resembles it.
func mostSimilar(lines, pattern []string) (int, bool) {
	kk := min(len(pattern), nearOldLines)
	best, at := 0.0, -1
	for i := 0; i < min(len(lines), nearScanLines); i++ {
		score := 0.0
		for j := 0; j < kk && i+j < len(lines); j++ {
			score += similarity(lines[i+j], pattern[j])
		}
		if score > best {
			best, at = score, i
		}
	}
	return at, at >= 0 && best >= 0.3
}

// numbered formats lines[from:to] with 1-based numbers, as read_file does.
func numbered(lines []string, from, to int) string {
	var sb strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&sb, "%6d\t%s\n", i+1, truncateLine(lines[i], 300))
	}
	return sb.String()
}

// similarity scores two lines in [0, 1] by their common prefix and
// suffix once trimmed; blank lines count little.
func similarity(a, b string) float64 {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if a == "" || b == "" {
		if a == b {
			return 0.2
		}
		return 0
	}
	if a == b {
		return 1
	}
	n := min(len(a), len(b))
	p := 0
	for p < n && a[p] == b[p] {
		p++
	}
	s := 0
	for s < n-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	return float64(p+s) / float64(max(len(a), len(b)))
}

// decodeLatin1 reads b as ISO 8859-1: each byte is the code point of
// the same value.
func decodeLatin1(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b) + len(b)/8)
	for _, c := range b {
		sb.WriteRune(rune(c))
	}
	return sb.String()
}

// encodeLatin1 writes s in ISO 8859-1; it fails on the first character
// above U+00FF.
func encodeLatin1(s string) ([]byte, string, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xFF {
			return nil, string(r), false
		}
		out = append(out, byte(r))
	}
	return out, "", true
}
