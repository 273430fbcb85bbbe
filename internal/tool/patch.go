package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/model"
)

// ApplyPatch applies a patch in Codex's apply_patch format: several
// files added, updated, moved or deleted in one call, all or nothing.
type ApplyPatch struct{}

// applyPatchDescription teaches the format; models of the OpenAI
// family are trained on it.
const applyPatchDescription = `Edit files of the workspace with a patch. Several files can be added, updated, moved or deleted in one call; if any part does not apply, nothing changes.
The patch is:
*** Begin Patch
[one or more file sections]
*** End Patch

A file section is one of:
*** Add File: <path>        then the new file's lines, each starting with +
*** Delete File: <path>
*** Update File: <path>     optionally followed by *** Move to: <new path>, then one or more chunks

A chunk starts with @@ (optionally "@@ <a line to find first>", such as the class or function the change is in) and holds the lines around the change: ' ' (a space) before an unchanged line, - before a removed line, + before an added line. Show 3 unchanged lines before and after each change, so the place is unambiguous; if that is not enough, add @@ lines naming the enclosing function or class. "*** End of File" after a chunk anchors it at the end of the file.
Paths are relative to the workspace, never absolute. Example:
*** Begin Patch
*** Update File: src/app.py
@@ def greet():
-    print("hi")
+    print("hello")
*** End Patch`

// Spec implements Tool.
func (ApplyPatch) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "apply_patch", Description: applyPatchDescription,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"patch":{"type":"string","description":"the whole patch, from *** Begin Patch to *** End Patch"}},"required":["patch"]}`)}
}

// Kind implements Classified.
func (ApplyPatch) Kind() Kind { return KindEdit }

type patchInput struct {
	Patch *string `json:"patch"`
}

// parseInput decodes and parses the call's patch.
func (ApplyPatch) parseInput(input json.RawMessage) ([]patchOp, error) {
	var in patchInput
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	if in.Patch == nil || strings.TrimSpace(*in.Patch) == "" {
		return nil, Errorf(ClassInvalidInput, "patch is required: the whole patch, from %q to %q", patchBegin, patchEnd)
	}
	if len(*in.Patch) > MaxEditBytes {
		return nil, Errorf(ClassInvalidInput, "the patch is %d bytes; the limit is %d", len(*in.Patch), MaxEditBytes)
	}
	ops, err := parsePatch(*in.Patch)
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, Errorf(ClassInvalidInput, "the patch changes no file: put file sections between %q and %q", patchBegin, patchEnd)
	}
	return ops, nil
}

// Targets implements Targeted: every path the patch adds, updates,
// deletes or moves to.
func (a ApplyPatch) Targets(input json.RawMessage) ([]string, error) {
	ops, err := a.parseInput(input)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, op := range ops {
		for _, p := range []string{op.path, op.moveTo} {
			if p == "" {
				continue
			}
			c, err := cleanPath(p)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// patchFile is one file operation, computed and ready to write.
type patchFile struct {
	op      byte   // 'A', 'M' (update in place), 'D', 'R' (update and move)
	display string // the cleaned path as written
	path    string // resolved
	old     []byte // nil if the file is new
	st      os.FileInfo
	new     []byte // nil for a delete
	// A move: the destination, and what it held (nil if new).
	toDisplay, to string
	toOld         []byte
	toSt          os.FileInfo
}

func (a ApplyPatch) plan(ctx context.Context, env Env, input json.RawMessage) ([]patchFile, error) {
	ops, err := a.parseInput(input)
	if err != nil {
		return nil, err
	}
	seen := map[string]string{} // resolved path -> the path as written
	claim := func(resolved, display string) error {
		if other, dup := seen[resolved]; dup {
			return Errorf(ClassInvalidInput, "the patch changes %s more than once (also as %s); put all its changes in one file section", display, other)
		}
		seen[resolved] = display
		return nil
	}
	var files []patchFile
	for i, op := range ops {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := planOp(env, op, i+1)
		if err != nil {
			return nil, err
		}
		if err := claim(f.path, f.display); err != nil {
			return nil, err
		}
		if f.op == 'R' {
			if err := claim(f.to, f.toDisplay); err != nil {
				return nil, err
			}
		}
		files = append(files, f)
	}
	return files, nil
}

// planOp computes one operation: reads what it changes, applies its
// chunks in memory.
func planOp(env Env, op patchOp, n int) (patchFile, error) {
	display, err := cleanPath(op.path)
	if err != nil {
		return patchFile{}, err
	}
	f := patchFile{display: display}
	switch op.kind {
	case 'A':
		f.op = 'A'
		if f.path, err = resolveFile(env, display, display); err != nil {
			return f, err
		}
		f.new = []byte(op.content)
		// Adding over an existing file replaces it (as Codex does).
		if f.old, f.st, err = readExisting(env, f.path, display); err != nil {
			return f, err
		}
	case 'D':
		f.op = 'D'
		f.path = resolvePath(env, display)
		fi, err := env.Root.Lstat(f.path)
		if err != nil {
			return f, fsError("delete", display, err)
		}
		switch {
		case fi.IsDir():
			return f, Errorf(ClassInvalidInput, "*** Delete File: %s is a directory; apply_patch deletes files", display)
		case fi.Mode()&fs.ModeSymlink != 0:
			return f, Errorf(ClassInvalidInput, "*** Delete File: %s is a symbolic link; apply_patch deletes regular files", display)
		}
		if f.old, f.st, err = readTextFile(env, f.path, display); err != nil {
			return f, err
		}
	case 'U':
		f.op = 'M'
		if f.path, err = resolveFile(env, display, display); err != nil {
			return f, err
		}
		if f.old, f.st, err = readTextFile(env, f.path, display); err != nil {
			return f, err
		}
		if f.new, err = applyChunks(f.old, op, display, n); err != nil {
			return f, err
		}
		if op.moveTo != "" {
			if f.toDisplay, err = cleanPath(op.moveTo); err != nil {
				return f, err
			}
			if f.to, err = resolveFile(env, f.toDisplay, f.toDisplay); err != nil {
				return f, err
			}
			if f.to != f.path {
				f.op = 'R'
				if f.toOld, f.toSt, err = readExisting(env, f.to, f.toDisplay); err != nil {
					return f, err
				}
			}
		}
	}
	if len(f.new) > MaxEditBytes {
		return f, Errorf(ClassInvalidInput, "%s would be %d bytes; the limit is %d", display, len(f.new), MaxEditBytes)
	}
	return f, nil
}

// readExisting reads p if it exists (for a file the patch replaces),
// nil if it does not.
func readExisting(env Env, p, display string) ([]byte, os.FileInfo, error) {
	if _, err := env.Root.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	b, st, err := readTextFile(env, p, display)
	if err != nil {
		return nil, nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, st, nil
}

// applyChunks applies an Update's chunks to old and returns the new
// content. Line ends follow the file's: a file whose lines end in CRLF
// gets CRLF on the lines the patch adds (lines are matched without
// their line ends).
func applyChunks(old []byte, op patchOp, display string, n int) ([]byte, error) {
	if isBinary(old) {
		return nil, Errorf(ClassInvalidInput, "%s looks binary (it holds NUL bytes); apply_patch edits text files", display)
	}
	latin1 := !utf8.Valid(old)
	text := string(old)
	if latin1 {
		text = decodeLatin1(old)
	}
	eol := "\n"
	if crlf := strings.Count(text, "\r\n"); crlf > 0 && crlf*2 >= strings.Count(text, "\n") {
		eol = "\r\n"
	}
	// Lines without their ends, and each line's end.
	raw := splitLines([]byte(text))
	lines, ends := make([]string, len(raw)), make([]string, len(raw))
	for i, l := range raw {
		switch {
		case strings.HasSuffix(l, "\r\n"):
			lines[i], ends[i] = l[:len(l)-2], "\r\n"
		case strings.HasSuffix(l, "\n"):
			lines[i], ends[i] = l[:len(l)-1], "\n"
		default:
			lines[i] = l
		}
	}
	// A replacement of lines[start:start+n] by the chunk's lines: its
	// context lines are the file's own (which fuzzy matching may have
	// found with other whitespace), with their line ends; removed lines
	// go, added lines come with the file's line end.
	type repl struct {
		start, n int
		lines    []chunkLine
	}
	var repls []repl
	at := 0
	for ci, c := range op.chunks {
		where := func() string {
			return fmt.Sprintf("chunk %d of *** Update File: %s (patch line %d)", ci+1, display, c.line)
		}
		if c.hasContext {
			i := seekLines(lines, []string{c.context}, at, false)
			if i < 0 {
				return nil, Errorf(ClassInvalidInput, "%s does not apply: its @@ line %q was not found%s. %s", where(), truncateLine(c.context, 200), afterLine(at), nearestHint(lines, []string{c.context}))
			}
			at = i + 1
		}
		cl := c.lines
		pat := c.old()
		if len(pat) == 0 {
			// Only additions: after the @@ line if there is one, else
			// at the end of the file.
			ins := len(lines)
			if c.hasContext && !c.eof {
				ins = at
			}
			repls = append(repls, repl{ins, 0, cl})
			at = ins
			continue
		}
		i := seekLines(lines, pat, at, c.eof)
		// Trailing empty context lines of a chunk are often the blank
		// line before the next chunk, or the file's final newline:
		// retry without them.
		for i < 0 && len(pat) > 1 && cl[len(cl)-1] == (chunkLine{' ', ""}) {
			cl, pat = cl[:len(cl)-1], pat[:len(pat)-1]
			i = seekLines(lines, pat, at, c.eof)
		}
		if i < 0 {
			return nil, Errorf(ClassInvalidInput, "%s does not apply: these lines (' ' and '-' lines of the chunk) were not found%s:\n%s%s",
				where(), afterLine(at), quoteLines(pat), nearestHint(lines, pat))
		}
		repls = append(repls, repl{i, len(pat), cl})
		at = i + len(pat)
	}
	sort.SliceStable(repls, func(i, j int) bool { return repls[i].start < repls[j].start })
	// Untouched lines keep their ends; a line without one (the last of
	// a file with no final line end) gets one only if a line follows.
	var sb strings.Builder
	sb.Grow(len(text) + 256)
	open := false // the last line written has no line end
	put := func(line, end string) {
		if open {
			sb.WriteString(eol)
		}
		sb.WriteString(line)
		sb.WriteString(end)
		open = end == ""
	}
	pos := 0
	for _, r := range repls {
		if r.start < pos {
			return nil, Errorf(ClassInvalidInput, "chunks of *** Update File: %s overlap; merge them into one", display)
		}
		for ; pos < r.start; pos++ {
			put(lines[pos], ends[pos])
		}
		for _, l := range r.lines {
			switch l.op {
			case ' ':
				put(lines[pos], ends[pos])
				pos++
			case '-':
				pos++
			case '+':
				put(l.text, eol)
			}
		}
	}
	for ; pos < len(lines); pos++ {
		put(lines[pos], ends[pos])
	}
	out := sb.String()
	if latin1 {
		b, bad, ok := encodeLatin1(out)
		if !ok {
			return nil, Errorf(ClassInvalidInput, "%s is not UTF-8 (it is read as Latin-1), and the patch adds %q, which Latin-1 cannot hold", display, bad)
		}
		return b, nil
	}
	return []byte(out), nil
}

func afterLine(at int) string {
	if at == 0 {
		return ""
	}
	return fmt.Sprintf(" after line %d (chunks apply in order)", at)
}

// quoteLines shows lines as they were looked for, at most 20.
func quoteLines(ls []string) string {
	var sb strings.Builder
	for i, l := range ls {
		if i == 20 {
			fmt.Fprintf(&sb, "    ... (%d more lines)\n", len(ls)-20)
			break
		}
		sb.WriteString("    " + truncateLine(l, 200) + "\n")
	}
	return sb.String()
}

// nearestHint shows the lines of the file most like pattern.
func nearestHint(lines, pattern []string) string {
	at, ok := mostSimilar(lines, pattern)
	if !ok {
		return "No lines of the file resemble them; read the file again."
	}
	end := min(at+max(len(pattern), 1), len(lines), at+30)
	return fmt.Sprintf("The most similar lines of the file are %d-%d:\n%sCopy context lines exactly, or read the file again.", at+1, end, numbered(lines, at, end))
}

// Preview implements Previewer.
func (a ApplyPatch) Preview(ctx context.Context, env Env, input json.RawMessage) (Change, error) {
	files, err := a.plan(ctx, env, input)
	if err != nil {
		return Change{}, err
	}
	return *patchChange(files), nil
}

func patchChange(files []patchFile) *Change {
	diffs := make([]fileDiff, 0, len(files))
	for _, f := range files {
		d := fileDiff{Path: f.display, Old: f.old, New: f.new}
		if f.op == 'R' {
			d.NewPath = f.toDisplay
		}
		diffs = append(diffs, d)
	}
	return newChange(diffs...)
}

// Run implements Tool.
func (a ApplyPatch) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	files, err := a.plan(ctx, env, input)
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if err := commitPatch(env, files); err != nil {
		return Result{}, err
	}
	var sb strings.Builder
	sb.WriteString("Success. Updated the following files:\n")
	var parts []string
	for _, f := range files {
		letter, p := string(f.op), f.display
		switch f.op {
		case 'A':
			if f.old != nil {
				letter = "M"
			}
		case 'R':
			letter, p = "M", f.toDisplay
		}
		fmt.Fprintf(&sb, "%s %s\n", letter, p)
		parts = append(parts, letter+" "+p)
	}
	sum := fmt.Sprintf("applied a patch to %d files: %s", len(files), strings.Join(parts, ", "))
	if len(files) == 1 {
		sum = "applied a patch: " + parts[0]
	}
	return Result{Content: sb.String(), Summary: truncateLine(sum, 300), Change: patchChange(files)}, nil
}

// commitPatch writes a computed patch, all or nothing. Every new content
// is first written to a temporary file beside its target (directories
// for new files are made then); if anything fails by then, or a file
// changed since it was read, the temporary files and new directories
// are removed and nothing else was touched. Then the temporary files are
// renamed into place and deleted files removed; a failure there undoes
// the steps already taken (restoring files from the content read).
func commitPatch(env Env, files []patchFile) (err error) {
	var temps []string
	var made []string // directories created, parents first
	defer func() {
		if err == nil {
			return
		}
		for _, t := range temps {
			if t != "" {
				_ = env.Root.Remove(t)
			}
		}
		for i := len(made) - 1; i >= 0; i-- {
			_ = env.Root.Remove(made[i]) // only if empty
		}
	}()
	temps = make([]string, len(files))
	for i, f := range files {
		if f.op == 'D' {
			continue
		}
		target, st := f.path, f.st
		if f.op == 'R' {
			target, st = f.to, f.toSt
		}
		if f.op == 'A' || f.op == 'R' {
			dirs, err := makeParents(env, target)
			made = append(made, dirs...)
			if err != nil {
				return fsError("create the directory of", target, err)
			}
		}
		if temps[i], err = writeTemp(env, target, f.new, st); err != nil {
			return fsError("write", target, err)
		}
	}
	for _, f := range files {
		for _, c := range []struct {
			p  string
			st os.FileInfo
		}{{f.path, f.st}, {f.to, f.toSt}} {
			if c.st != nil && !sameFile(env, c.p, c.st) {
				return Errorf(ClassExecution, "apply_patch %s: %v; nothing was changed", c.p, errChanged)
			}
		}
	}
	// The point of no return, undone step by step on failure.
	var undo []func()
	fail := func(e error) error {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return Errorf(ClassExecution, "%v; the changes already made were undone", e)
	}
	restore := func(p string, b []byte, st os.FileInfo) func() {
		return func() { _ = replaceFile(env, p, b, st) }
	}
	remove := func(p string) func() { return func() { _ = env.Root.Remove(p) } }
	undoOf := func(p string, old []byte, st os.FileInfo) func() {
		if old == nil {
			return remove(p)
		}
		return restore(p, old, st)
	}
	for i, f := range files {
		if patchStepHook != nil {
			if err := patchStepHook(i); err != nil {
				return fail(err)
			}
		}
		switch f.op {
		case 'A', 'M':
			if err := env.Root.Rename(temps[i], f.path); err != nil {
				return fail(fmt.Errorf("write %s: %w", f.display, err))
			}
			temps[i] = ""
			undo = append(undo, undoOf(f.path, f.old, f.st))
		case 'R':
			if err := env.Root.Rename(temps[i], f.to); err != nil {
				return fail(fmt.Errorf("write %s: %w", f.toDisplay, err))
			}
			temps[i] = ""
			undo = append(undo, undoOf(f.to, f.toOld, f.toSt))
			if err := env.Root.Remove(f.path); err != nil {
				return fail(fmt.Errorf("remove %s: %w", f.display, err))
			}
			undo = append(undo, restore(f.path, f.old, f.st))
		case 'D':
			if err := env.Root.Remove(f.path); err != nil {
				return fail(fmt.Errorf("delete %s: %w", f.display, err))
			}
			undo = append(undo, restore(f.path, f.old, f.st))
		}
	}
	return nil
}

// patchStepHook, when set (by tests), runs before each step of a
// commit; an error fails the commit there.
var patchStepHook func(step int) error

// makeParents creates the missing directories above p and returns
// those it created, parents first.
func makeParents(env Env, p string) ([]string, error) {
	dir := path.Dir(p)
	if dir == "." {
		return nil, nil
	}
	var missing []string
	for d := dir; d != "."; d = path.Dir(d) {
		if _, err := env.Root.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := env.Root.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return made, err
		}
		made = append(made, missing[i])
	}
	return made, nil
}
