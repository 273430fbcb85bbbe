package tool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/gabriel-vasile/mimetype"

	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/model"
)

// Size caps of the file tools.
const (
	// MaxReadBytes is the most read_file returns; longer files are cut
	// and the result says so.
	MaxReadBytes = 256 << 10
	// MaxListEntries is the most list_dir returns.
	MaxListEntries = 1000
	// MaxWriteBytes is the largest content write_file accepts.
	MaxWriteBytes = 8 << 20
)

// Builtins returns the built-in tools: the file tools, the searches,
// shell and web_fetch (in its default form: public addresses only).
func Builtins() []Tool {
	return []Tool{ListDir{}, ReadFile{}, WriteFile{}, EditFile{}, ApplyPatch{}, Glob{}, Grep{}, Shell{}, WebFetch{}}
}

// ListDir lists a workspace directory.
type ListDir struct{}

// Spec implements Tool.
func (ListDir) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "list_dir", Description: "List the entries of a directory in the workspace. Directories end with '/'.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"directory relative to the workspace; '.' for its root"}},"required":["path"]}`)}
}

// Run implements Tool.
func (ListDir) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	var in struct {
		Path string `json:"path"`
	}
	if err := decodeInput(input, &in); err != nil {
		return Result{}, err
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return Result{}, err
	}
	p = resolvePath(env, p)
	f, err := openNoBlock(env.Root, p, os.O_RDONLY)
	if err != nil {
		return Result{}, fsError("list", in.Path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Result{}, fsError("list", in.Path, err)
	}
	if !st.IsDir() {
		return Result{}, Errorf(ClassInvalidInput, "list %s: not a directory", in.Path)
	}
	ents, err := f.ReadDir(MaxListEntries + 1)
	if err != nil && err != io.EOF {
		return Result{}, fsError("list", in.Path, err)
	}
	truncated := len(ents) > MaxListEntries
	if truncated {
		ents = ents[:MaxListEntries]
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		names = append(names, n)
	}
	sort.Strings(names)
	out := strings.Join(names, "\n")
	if truncated {
		out += fmt.Sprintf("\n[listing truncated at %d entries]", MaxListEntries)
	}
	return Result{Content: out, Summary: fmt.Sprintf("%d entries in %s", len(names), p)}, nil
}

// ReadFile reads a workspace file.
type ReadFile struct{}

// Spec implements Tool.
func (ReadFile) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "read_file",
		Description: "Read a text file in the workspace. Without offset or limit it returns the file as it is, up to 256 KiB. " +
			"To read a long file in parts, give offset (the first line, from 1) and limit (how many lines); line_numbers numbers each line (\"     12\tline\"), to quote exact lines in an edit. " +
			"A PNG, JPEG, GIF or WebP image (up to 5 MiB) is returned as an image. Other binary files are refused.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"file relative to the workspace"},` +
			`"offset":{"type":"integer","minimum":1,"description":"first line to read, from 1"},` +
			`"limit":{"type":"integer","minimum":1,"description":"most lines to read"},` +
			`"line_numbers":{"type":"boolean","description":"number the lines, as cat -n does"}},` +
			`"required":["path"]}`)}
}

type readInput struct {
	Path        string `json:"path"`
	Offset      *int   `json:"offset"`
	Limit       *int   `json:"limit"`
	LineNumbers bool   `json:"line_numbers"`
}

// Run implements Tool.
func (ReadFile) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	var in readInput
	if err := decodeInput(input, &in); err != nil {
		return Result{}, err
	}
	if in.Path == "" {
		return Result{}, Errorf(ClassInvalidInput, "path is required")
	}
	if in.Offset != nil && *in.Offset < 0 {
		return Result{}, Errorf(ClassInvalidInput, "offset is the first line to read, from 1; got %d", *in.Offset)
	}
	if in.Limit != nil && *in.Limit < 1 {
		return Result{}, Errorf(ClassInvalidInput, "limit is the number of lines to read, at least 1; got %d", *in.Limit)
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return Result{}, err
	}
	p = resolvePath(env, p)
	f, err := openNoBlock(env.Root, p, os.O_RDONLY)
	if err != nil {
		return Result{}, fsError("read", in.Path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Result{}, fsError("read", in.Path, err)
	}
	if st.IsDir() {
		return Result{}, Errorf(ClassInvalidInput, "read %s: is a directory", in.Path)
	}
	if !st.Mode().IsRegular() {
		return Result{}, Errorf(ClassInvalidInput, "read %s: not a regular file", in.Path)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	head, err := r.Peek(sniffBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return Result{}, fsError("read", in.Path, err)
	}
	if images.Sniff(head) != "" {
		return readImage(ctx, r, in.Path, st.Size())
	}
	if kind, binary := sniffBinary(head); binary {
		return Result{}, Errorf(ClassInvalidInput, "read %s: a binary file (%s, %d bytes); read_file reads text files", in.Path, kind, st.Size())
	}
	if !editorCaps(env).ReadTextFile {
		return readText(ctx, r, p, in)
	}
	// The checks above ran on disk; the text is the editor's buffer.
	text, why, ok := editorRead(ctx, env, p)
	if !ok {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		res, err := readText(ctx, r, p, in)
		return viaDisk(res, why), err
	}
	res, err := readText(ctx, bufio.NewReader(strings.NewReader(text)), p, in)
	return viaEditor(res), err
}

// readText reads the text r holds, whole or by lines.
func readText(ctx context.Context, r *bufio.Reader, p string, in readInput) (Result, error) {
	if in.Offset == nil && in.Limit == nil && !in.LineNumbers {
		return readWhole(r, p, in.Path)
	}
	return readLines(ctx, r, p, in)
}

// sniffBytes is how much of a file decides whether it is binary.
const sniffBytes = 8 << 10

// sniffBinary tells a binary file by its first bytes: a NUL byte (as
// git does), or a format that is not text (by its signature).
func sniffBinary(head []byte) (string, bool) {
	m := mimetype.Detect(head)
	if bytes.IndexByte(head, 0) >= 0 {
		return m.String(), true
	}
	for t := m; t != nil; t = t.Parent() {
		if t.Is("text/plain") {
			return "", false
		}
	}
	return m.String(), true
}

// readWhole returns the file as it is, up to MaxReadBytes.
func readWhole(r io.Reader, p, display string) (Result, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxReadBytes+1))
	if err != nil {
		return Result{}, fsError("read", display, err)
	}
	if len(b) <= MaxReadBytes {
		return Result{Content: string(b), Summary: fmt.Sprintf("read %d bytes of %s", len(b), p)}, nil
	}
	b = b[:MaxReadBytes]
	next := bytes.Count(b, []byte("\n")) + 1
	return Result{Content: string(b) + fmt.Sprintf("\n[file truncated: only the first %d bytes are shown; read on with offset=%d]", MaxReadBytes, next),
		Summary: fmt.Sprintf("read first %d bytes of %s (truncated)", MaxReadBytes, p)}, nil
}

// maxCountBytes bounds the scan that counts the lines after those read.
const maxCountBytes = 64 << 20

// readLines returns lines offset..offset+limit-1 of the file, numbered
// if asked, up to MaxReadBytes, with a note on where to read on.
func readLines(ctx context.Context, r *bufio.Reader, p string, in readInput) (Result, error) {
	first := 1
	if in.Offset != nil && *in.Offset > 1 {
		first = *in.Offset
	}
	limit := math.MaxInt
	if in.Limit != nil {
		limit = *in.Limit
	}
	line := 1 // the line r is at
	for line < first {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		chunk, err := r.ReadSlice('\n')
		if err == nil {
			line++
			continue
		}
		if err == bufio.ErrBufferFull {
			continue // a long line: read on to its end
		}
		if err == io.EOF {
			if len(chunk) > 0 {
				line++
			}
			return Result{}, Errorf(ClassInvalidInput, "read %s: offset %d is past the end of the file (%d lines)", in.Path, first, line-1)
		}
		return Result{}, fsError("read", in.Path, err)
	}
	if _, err := r.Peek(1); err == io.EOF && first > 1 {
		return Result{}, Errorf(ClassInvalidInput, "read %s: offset %d is past the end of the file (%d lines)", in.Path, first, line-1)
	}
	var out strings.Builder
	shown, cut, pending := 0, false, false
	for shown < limit {
		text, err := readLineCapped(r, MaxReadBytes+1)
		if len(text) == 0 && err != nil {
			if err != io.EOF {
				return Result{}, fsError("read", in.Path, err)
			}
			break
		}
		text = strings.TrimSuffix(strings.TrimSuffix(text, "\n"), "\r")
		entry := text
		if in.LineNumbers {
			entry = fmt.Sprintf("%6d\t%s", line, text)
		}
		if out.Len()+len(entry)+1 > MaxReadBytes {
			if shown == 0 { // a single line longer than the cap
				out.WriteString(truncateUTF8(entry, MaxReadBytes) + "\n")
				shown = 1
			} else {
				pending = true // read, but not shown
			}
			cut = true
			break
		}
		out.WriteString(entry)
		out.WriteByte('\n')
		shown++
		line++
		if err == io.EOF {
			break
		}
	}
	last := first + shown - 1
	// How many lines remain, bounded.
	rest, more := countLines(r)
	if pending {
		rest++
	}
	sum := fmt.Sprintf("read lines %d-%d of %s", first, last, p)
	switch {
	case shown == 0:
		sum = fmt.Sprintf("read no lines of %s", p)
	case rest > 0 || more:
		total := fmt.Sprintf("%d", last+rest)
		if more {
			total = "more than " + total
		}
		why := ""
		if cut {
			why = fmt.Sprintf(" (output is limited to %d bytes)", MaxReadBytes)
		}
		fmt.Fprintf(&out, "[lines %d-%d of %s%s; read on with offset=%d]", first, last, total, why, last+1)
		sum += " (more follow)"
	}
	return Result{Content: out.String(), Summary: sum}, nil
}

// readLineCapped reads the next line (with its "\n") keeping at most
// max bytes of it: the rest of a longer line is read and dropped, so a
// file of one huge line cannot fill memory.
func readLineCapped(r *bufio.Reader, max int) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if room := max - len(b); room > 0 {
			b = append(b, chunk[:min(len(chunk), room)]...)
		}
		if err != bufio.ErrBufferFull {
			return string(b), err
		}
	}
}

// countLines counts the lines left in r, reading at most maxCountBytes;
// more reports that it stopped before the end.
func countLines(r *bufio.Reader) (n int, more bool) {
	read := 0
	ended := true // the last byte read ended a line
	buf := make([]byte, 64<<10)
	for read < maxCountBytes {
		k, err := r.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte("\n"))
			ended = buf[k-1] == '\n'
			read += k
		}
		if err != nil {
			if !ended {
				n++
			}
			return n, false
		}
	}
	return n, true
}

// truncateUTF8 cuts s to at most n bytes on a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// WriteFile writes a workspace file, creating or replacing it.
type WriteFile struct{}

// Spec implements Tool.
func (WriteFile) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "write_file", Description: "Create or overwrite a file in the workspace with the given content.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)}
}

type writeInput struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// check validates a write_file input and returns the resolved path.
func (in *writeInput) check(env Env) (string, error) {
	if in.Path == "" {
		return "", Errorf(ClassInvalidInput, "path is required")
	}
	if len(in.Content) > MaxWriteBytes {
		return "", Errorf(ClassInvalidInput, "content is %d bytes; the limit is %d", len(in.Content), MaxWriteBytes)
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return "", err
	}
	p = resolvePath(env, p)
	if strings.HasSuffix(in.Path, "/") {
		// Confinement comes first (spec §5): "link/" through a symlink
		// leading out is permission_denied, not merely a bad path.
		if _, err := env.Root.Stat(p); isEscape(err) {
			return "", fsError("write", in.Path, err)
		}
		return "", Errorf(ClassInvalidInput, "write %s: path names a directory", in.Path)
	}
	return p, nil
}

// parseWrite decodes and checks a write_file input; it returns the
// resolved path.
func parseWrite(env Env, input json.RawMessage) (writeInput, string, error) {
	var in writeInput
	if err := decodeInput(input, &in); err != nil {
		return in, "", err
	}
	p, err := in.check(env)
	return in, p, err
}

// previous reads what p holds before a write, for the diff: nil if it
// does not exist (or is not a regular file: the write refuses it);
// a file too large to show is summarised.
func previous(env Env, p string) []byte {
	f, err := openNoBlock(env.Root, p, os.O_RDONLY)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxWriteBytes+1))
	if err != nil || len(b) > MaxWriteBytes {
		return []byte(fmt.Sprintf("(the previous content, over %d bytes, is not shown)\n", MaxWriteBytes))
	}
	return b
}

// Preview implements Previewer: the diff between the file as it is and
// the content, without writing. It refuses what Run refuses: a path out
// of the workspace, a directory, a file with other hard links, a
// missing parent directory.
func (WriteFile) Preview(ctx context.Context, env Env, input json.RawMessage) (Change, error) {
	in, p, err := parseWrite(env, input)
	if err != nil {
		return Change{}, err
	}
	if err := checkWritable(env, p, in.Path); err != nil {
		return Change{}, err
	}
	clean, _ := cleanPath(in.Path)
	return *newChange(fileDiff{Path: clean, Old: previous(env, p), New: []byte(in.Content)}), nil
}

// checkWritable refuses, without writing anything, what a write of p
// refuses: a directory, a special file, a file with other hard links, a
// missing parent directory.
func checkWritable(env Env, p, display string) error {
	st, err := env.Root.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := env.Root.Stat(path.Dir(p)); err != nil {
			return fsError("write", display, err)
		}
	case err != nil:
		return fsError("write", display, err)
	case st.IsDir():
		return Errorf(ClassInvalidInput, "write %s: is a directory", display)
	case !st.Mode().IsRegular():
		return Errorf(ClassInvalidInput, "write %s: not a regular file", display)
	default:
		f, err := openNoBlock(env.Root, p, os.O_RDONLY)
		if err != nil {
			return fsError("write", display, err)
		}
		err = refuseHardLinked(f, display)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Run implements Tool.
func (WriteFile) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	in, p, err := parseWrite(env, input)
	if err != nil {
		return Result{}, err
	}
	if !editorCaps(env).WriteTextFile {
		return writeDisk(env, p, in)
	}
	res, why, err := writeEditor(ctx, env, p, in)
	if why == "" {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	res, err = writeDisk(env, p, in)
	return viaDisk(res, why), err
}

// writeEditor writes through the session's editor, after the checks the
// disk write makes; the diff is from the editor's buffer when it can be
// read. When the editor did not save the file (its answer came and the
// disk does not hold the content), the server writes the disk too, so
// that every client, the checkpoints and later reads see the same file.
// It returns why the editor could not serve the call ("" when it did).
func writeEditor(ctx context.Context, env Env, p string, in writeInput) (Result, string, error) {
	if err := checkWritable(env, p, in.Path); err != nil {
		return Result{}, "", err
	}
	old := previous(env, p)
	if old != nil && editorCaps(env).ReadTextFile {
		if text, _, ok := editorRead(ctx, env, p); ok {
			old = []byte(text)
		}
	}
	if why, ok := editorWrite(ctx, env, p, in.Content); !ok {
		return Result{}, why, nil
	}
	msg := fmt.Sprintf("wrote %d bytes to %s", len(in.Content), p)
	if disk := previous(env, p); disk == nil || string(disk) != in.Content {
		if _, err := writeDisk(env, p, in); err != nil {
			return Result{}, "", fmt.Errorf("the editor holds the new content, but writing it on disk failed: %w", err)
		}
		msg += "; the editor did not save it, so the server wrote it on disk"
	}
	clean, _ := cleanPath(in.Path)
	res := Result{Content: msg + " (through the editor)", Summary: msg, Change: newChange(fileDiff{Path: clean, Old: old, New: []byte(in.Content)})}
	return viaEditor(res), "", nil
}

// writeDisk writes the file on disk (p resolved, in checked).
func writeDisk(env Env, p string, in writeInput) (Result, error) {
	old := previous(env, p)
	// Not O_TRUNC: the file is checked before anything in it changes.
	f, err := openNoBlock(env.Root, p, os.O_WRONLY|os.O_CREATE)
	switch {
	case errors.Is(err, syscall.EISDIR):
		return Result{}, Errorf(ClassInvalidInput, "write %s: is a directory", in.Path)
	case errors.Is(err, syscall.ENXIO):
		// O_NONBLOCK open of a FIFO nobody reads.
		return Result{}, Errorf(ClassInvalidInput, "write %s: not a regular file", in.Path)
	case err != nil:
		return Result{}, fsError("write", in.Path, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return Result{}, fsError("write", in.Path, err)
		}
		return Result{}, Errorf(ClassInvalidInput, "write %s: not a regular file", in.Path)
	}
	if err := refuseHardLinked(f, in.Path); err != nil {
		f.Close()
		return Result{}, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return Result{}, fsError("write", in.Path, err)
	}
	if _, err := f.WriteString(in.Content); err != nil {
		f.Close()
		return Result{}, fsError("write", in.Path, err)
	}
	if err := f.Close(); err != nil {
		return Result{}, fsError("write", in.Path, err)
	}
	clean, _ := cleanPath(in.Path)
	msg := fmt.Sprintf("wrote %d bytes to %s", len(in.Content), p)
	return Result{Content: msg, Summary: msg, Change: newChange(fileDiff{Path: clean, Old: old, New: []byte(in.Content)})}, nil
}

// refuseHardLinked refuses to write a file that has more than one name:
// a hard link made in the workspace to a file outside it (ln
// ../outside/file name, possible for any file on the same filesystem
// that the server's user may write) would let a write change that file,
// and no path check can see where the other names are.
func refuseHardLinked(f *os.File, p string) error {
	st, err := f.Stat()
	if err != nil {
		return fsError("write", p, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		return Errorf(ClassPermissionDenied, "write %s: the file has %d hard links, and its other names may lie outside the workspace; write to a new file instead", p, sys.Nlink)
	}
	return nil
}
