package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

func numberedFile(n int, eol string) string {
	var sb strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&sb, "line%d%s", i, eol)
	}
	return sb.String()
}

func TestReadFileOffsetAndLimit(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "f.txt"), numberedFile(20, "\n"))
	res, err := run(t, tool.ReadFile{}, env, map[string]any{"path": "f.txt", "offset": 5, "limit": 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := "line5\nline6\nline7\n[lines 5-7 of 20; read on with offset=8]"; res.Content != want {
		t.Errorf("content = %q, want %q", res.Content, want)
	}
	// To the end: no note.
	res, err = run(t, tool.ReadFile{}, env, map[string]any{"path": "f.txt", "offset": 19})
	if err != nil || res.Content != "line19\nline20\n" {
		t.Errorf("tail = %q, %v", res.Content, err)
	}
	// offset 0 reads from the start, as 1 does.
	res, err = run(t, tool.ReadFile{}, env, map[string]any{"path": "f.txt", "offset": 0, "limit": 1})
	if err != nil || !strings.HasPrefix(res.Content, "line1\n[lines 1-1 of 20") {
		t.Errorf("offset 0 = %q, %v", res.Content, err)
	}
}

func TestReadFileLineNumbers(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "w.txt"), "alpha\r\n\tbeta\r\ngamma")
	res, err := run(t, tool.ReadFile{}, env, map[string]any{"path": "w.txt", "line_numbers": true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "     1\talpha\n     2\t\tbeta\n     3\tgamma\n"; res.Content != want {
		t.Errorf("content = %q, want %q", res.Content, want)
	}
}

// TestReadFileReadsALongFileInParts: a 20,000-line file read in parts by
// following the notes comes back whole.
func TestReadFileReadsALongFileInParts(t *testing.T) {
	ws, env := workspace(t)
	body := numberedFile(20000, "\n")
	mustWrite(t, filepath.Join(ws, "long.txt"), body)
	note := regexp.MustCompile(`\[lines \d+-\d+ of 20000; read on with offset=(\d+)\]$`)
	var got strings.Builder
	offset, calls := 1, 0
	for ; calls < 10; calls++ {
		res, err := run(t, tool.ReadFile{}, env, map[string]any{"path": "long.txt", "offset": offset, "limit": 6000})
		if err != nil {
			t.Fatal(err)
		}
		m := note.FindStringSubmatch(res.Content)
		if m == nil {
			got.WriteString(res.Content)
			break
		}
		got.WriteString(strings.TrimSuffix(res.Content, m[0]))
		offset, _ = strconv.Atoi(m[1])
	}
	if calls != 3 || got.String() != body {
		t.Fatalf("after %d calls got %d bytes, want %d", calls+1, got.Len(), len(body))
	}
}

// TestReadFileLineOutputIsCapped: numbered output stops at the cap, on
// a line boundary, and says where to read on.
func TestReadFileLineOutputIsCapped(t *testing.T) {
	ws, env := workspace(t)
	line := strings.Repeat("x", 999) + "\n"
	mustWrite(t, filepath.Join(ws, "big.txt"), strings.Repeat(line, 1000))
	res, err := run(t, tool.ReadFile{}, env, map[string]any{"path": "big.txt", "line_numbers": true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) > tool.MaxReadBytes+200 {
		t.Fatalf("content is %d bytes", len(res.Content))
	}
	if !regexp.MustCompile(`\[lines 1-\d+ of 1000 \(output is limited to \d+ bytes\); read on with offset=\d+\]$`).MatchString(res.Content) {
		t.Errorf("note: %q", res.Content[len(res.Content)-120:])
	}
	// One line longer than the cap is cut, not refused.
	mustWrite(t, filepath.Join(ws, "one.txt"), strings.Repeat("y", tool.MaxReadBytes*2)+"\nnext\n")
	res, err = run(t, tool.ReadFile{}, env, map[string]any{"path": "one.txt", "offset": 1, "limit": 1})
	if err != nil || len(res.Content) > tool.MaxReadBytes+200 || !strings.Contains(res.Content, "offset=2") {
		t.Errorf("one long line: %d bytes, %v", len(res.Content), err)
	}
}

func TestReadFileRefusesBinaryFiles(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "prog"), "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00\x01\x00\x00\x00")
	mustWrite(t, filepath.Join(ws, "nul.txt"), "text\x00more")
	mustWrite(t, filepath.Join(ws, "doc.pdf"), "%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")
	for p, kind := range map[string]string{"prog": "application/x-", "nul.txt": "", "doc.pdf": "application/pdf"} {
		for _, in := range []map[string]any{{"path": p}, {"path": p, "offset": 1}} {
			_, err := run(t, tool.ReadFile{}, env, in)
			wantClass(t, err, tool.ClassInvalidInput)
			if !strings.Contains(err.Error(), "binary file") || !strings.Contains(err.Error(), kind) {
				t.Errorf("%s: %v", p, err)
			}
		}
	}
	// Text that is not UTF-8, and empty files, are text.
	mustWrite(t, filepath.Join(ws, "latin1.txt"), "caf\xe9\n")
	mustWrite(t, filepath.Join(ws, "empty.txt"), "")
	for _, p := range []string{"latin1.txt", "empty.txt"} {
		if _, err := run(t, tool.ReadFile{}, env, map[string]any{"path": p}); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestReadFileBadInput(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "f.txt"), "a\nb\n")
	for _, c := range []struct{ input, says string }{
		{`{"path":"f.txt","offset":-1}`, "offset"},
		{`{"path":"f.txt","limit":0}`, "limit"},
		{`{"path":"f.txt","offset":"3"}`, "not a valid object"},
		{`{"path":"f.txt","line_numbers":"yes"}`, "not a valid object"},
		{`{"path":"f.txt","offset":3}`, "past the end of the file (2 lines)"},
		{`{"offset":3}`, "path is required"},
	} {
		_, err := tool.ReadFile{}.Run(context.Background(), env, json.RawMessage(c.input))
		wantClass(t, err, tool.ClassInvalidInput)
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v does not say %q", c.input, err, c.says)
		}
	}
}

func TestWriteFileReportsTheDiff(t *testing.T) {
	ws, env := workspace(t)
	res, err := run(t, tool.WriteFile{}, env, map[string]string{"path": "./n.txt", "content": "a\nb\n"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Change == nil || strings.Join(res.Change.Paths, ",") != "n.txt" || res.Change.Diff != "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n" {
		t.Fatalf("change of a new file = %+v", res.Change)
	}
	in := json.RawMessage(`{"path":"n.txt","content":"a\nc\n"}`)
	pre, err := tool.WriteFile{}.Preview(context.Background(), env, in)
	if err != nil {
		t.Fatal(err)
	}
	if readWS(t, ws, "n.txt") != "a\nb\n" {
		t.Fatal("preview wrote")
	}
	res, err = tool.WriteFile{}.Run(context.Background(), env, in)
	if err != nil {
		t.Fatal(err)
	}
	if want := "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"; res.Change.Diff != want || pre.Diff != want {
		t.Errorf("diff = %q, preview %q, want %q", res.Change.Diff, pre.Diff, want)
	}
}

// TestWriteFileDiffIsBounded: a write larger than the diff bound reports
// a diff cut at the bound, with a note.
func TestWriteFileDiffIsBounded(t *testing.T) {
	_, env := workspace(t)
	res, err := run(t, tool.WriteFile{}, env, map[string]string{"path": "big.txt", "content": strings.Repeat("0123456789\n", 20000)})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Change.Diff
	if !res.Change.DiffTruncated || len(d) > tool.MaxDiffBytes+100 || !strings.HasSuffix(d, "bytes]\n") || !strings.Contains(d, "[diff truncated") {
		t.Errorf("diff of %d bytes, truncated %v, ends %q", len(d), res.Change.DiffTruncated, d[max(0, len(d)-80):])
	}
}

func TestWriteFilePreviewRefusesWhatRunRefuses(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	mustWrite(t, filepath.Join(base, "outside.txt"), "o")
	mustWrite(t, filepath.Join(ws, "d", "x"), "x")
	if err := os.Link(filepath.Join(base, "outside.txt"), filepath.Join(ws, "hard")); err != nil {
		t.Skip(err)
	}
	env := newEnv(t, ws)
	for p, class := range map[string]string{"d": tool.ClassInvalidInput, "hard": tool.ClassPermissionDenied,
		"nodir/x": tool.ClassNotFound, "../x": tool.ClassPermissionDenied} {
		in, _ := json.Marshal(map[string]string{"path": p, "content": "c"})
		_, perr := tool.WriteFile{}.Preview(context.Background(), env, in)
		_, rerr := tool.WriteFile{}.Run(context.Background(), env, in)
		if tool.ClassOf(perr) != class || tool.ClassOf(rerr) != class {
			t.Errorf("%s: preview %v, run %v; want %s", p, perr, rerr, class)
		}
	}
}

func TestReadFileReturnsAnImageAsAnImage(t *testing.T) {
	ws, env := workspace(t)
	var buf bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	// The name lies (.txt): the content decides.
	mustWrite(t, filepath.Join(ws, "shot.txt"), buf.String())
	res, err := run(t, tool.ReadFile{}, env, map[string]any{"path": "shot.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Images) != 1 {
		t.Fatalf("images: %+v", res.Images)
	}
	im := res.Images[0]
	if im.MediaType != "image/png" || im.Width != 3 || im.Height != 2 || !bytes.Equal(im.Data, buf.Bytes()) || len(im.SHA256) != 64 {
		t.Errorf("image block: %+v", im)
	}
	if !strings.Contains(res.Content, "shot.txt") || !strings.Contains(res.Content, "PNG 3×2") {
		t.Errorf("content: %q", res.Content)
	}
	// A truncated PNG is refused with the reason, not returned.
	mustWrite(t, filepath.Join(ws, "cut.png"), buf.String()[:buf.Len()-20])
	_, err = run(t, tool.ReadFile{}, env, map[string]any{"path": "cut.png"})
	wantClass(t, err, tool.ClassInvalidInput)
	if !strings.Contains(err.Error(), "cut.png") || !strings.Contains(err.Error(), "image") {
		t.Errorf("truncated: %v", err)
	}
}
