package tool_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/editor"
	"github.com/metis-agent/metis/internal/tool"
)

// fakeEditor is an editor's buffers: Read serves a buffer (or the
// disk), Write sets it, and saves it on disk when save is set.
type fakeEditor struct {
	caps     editor.Caps
	save     bool
	err      error // every request fails with it
	mu       sync.Mutex
	buffers  map[string]string
	requests []string
}

func (f *fakeEditor) Offers(string) editor.Caps { return f.caps }

func (f *fakeEditor) ReadTextFile(_ context.Context, _, _, path string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, "read "+path)
	if f.err != nil {
		return "", f.err
	}
	if b, ok := f.buffers[path]; ok {
		return b, nil
	}
	b, err := os.ReadFile(path)
	return string(b), err
}

func (f *fakeEditor) WriteTextFile(_ context.Context, _, _, path, content string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, "write "+path)
	if f.err != nil {
		return f.err
	}
	if f.buffers == nil {
		f.buffers = map[string]string{}
	}
	f.buffers[path] = content
	if f.save {
		return os.WriteFile(path, []byte(content), 0o644)
	}
	return nil
}

var bothCaps = editor.Caps{ReadTextFile: true, WriteTextFile: true}

func editorEnv(t *testing.T, ed tool.Editor, files map[string]string) (tool.Env, string) {
	t.Helper()
	ws := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := newEnv(t, ws)
	env.Editor, env.ToolUseID = ed, "tu_1"
	return env, ws
}

func readDisk(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadFileReadsTheEditorsBuffer(t *testing.T) {
	ed := &fakeEditor{caps: bothCaps, buffers: map[string]string{}}
	env, ws := editorEnv(t, ed, map[string]string{"a.txt": "disk\n"})
	ed.buffers[filepath.Join(ws, "a.txt")] = "one\nunsaved\nthree\n"
	res, err := run(t, tool.ReadFile{}, env, map[string]any{"path": "a.txt", "offset": 2, "limit": 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Via != tool.ViaEditor || !strings.HasPrefix(res.Content, "unsaved") {
		t.Fatalf("via %q, content %q", res.Via, res.Content)
	}
}

func TestReadFileFallsBackToTheDiskWhenTheEditorFails(t *testing.T) {
	ed := &fakeEditor{caps: bothCaps, err: &editor.AnswerError{Message: "busy"}}
	env, _ := editorEnv(t, ed, map[string]string{"a.txt": "disk\n"})
	res, err := run(t, tool.ReadFile{}, env, map[string]any{"path": "a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Via != tool.ViaDisk || res.Content != "disk\n" || !strings.Contains(res.Summary, "on disk: the editor refused: busy") {
		t.Fatalf("via %q, content %q, summary %q", res.Via, res.Content, res.Summary)
	}
}

// With the broker itself: nobody answers, the request times out, and
// the disk serves the call.
func TestFileToolsFallBackToTheDiskWhenTheEditorDoesNotAnswer(t *testing.T) {
	b := editor.New(30 * time.Millisecond)
	env, ws := editorEnv(t, b, map[string]string{"a.txt": "disk\n"})
	env.SessionID = "ses_1"
	att := b.Attach("ses_1", bothCaps)
	defer att.Detach()
	res, err := run(t, tool.ReadFile{}, env, map[string]any{"path": "a.txt"})
	if err != nil || res.Via != tool.ViaDisk || res.Content != "disk\n" || !strings.Contains(res.Summary, "did not answer in time") {
		t.Fatalf("read: %v; via %q, content %q, summary %q", err, res.Via, res.Content, res.Summary)
	}
	res, err = run(t, tool.WriteFile{}, env, map[string]any{"path": "a.txt", "content": "new\n"})
	if err != nil || res.Via != tool.ViaDisk || readDisk(t, filepath.Join(ws, "a.txt")) != "new\n" {
		t.Fatalf("write: %v; via %q", err, res.Via)
	}
	res, err = run(t, tool.EditFile{}, env, map[string]any{"path": "a.txt", "old_string": "new", "new_string": "newer"})
	if err != nil || res.Via != tool.ViaDisk || readDisk(t, filepath.Join(ws, "a.txt")) != "newer\n" {
		t.Fatalf("edit: %v; via %q", err, res.Via)
	}
}

// The editor goes away while a write waits: the disk serves it.
func TestWriteFileFallsBackToTheDiskWhenTheEditorDetaches(t *testing.T) {
	b := editor.New(time.Hour)
	env, ws := editorEnv(t, b, nil)
	env.SessionID = "ses_1"
	att := b.Attach("ses_1", bothCaps)
	go func() {
		<-att.Requests()
		att.Detach()
	}()
	res, err := run(t, tool.WriteFile{}, env, map[string]any{"path": "n.txt", "content": "x\n"})
	if err != nil || res.Via != tool.ViaDisk || !strings.Contains(res.Summary, "detached") {
		t.Fatalf("%v; via %q, summary %q", err, res.Via, res.Summary)
	}
	if readDisk(t, filepath.Join(ws, "n.txt")) != "x\n" {
		t.Fatal("the disk does not hold the write")
	}
}

func TestEditFileEditsTheBufferAndTheDiskFollows(t *testing.T) {
	for _, save := range []bool{true, false} {
		ed := &fakeEditor{caps: bothCaps, save: save, buffers: map[string]string{}}
		env, ws := editorEnv(t, ed, map[string]string{"a.txt": "alpha\n"})
		p := filepath.Join(ws, "a.txt")
		ed.buffers[p] = "alpha\nbeta\n"
		res, err := run(t, tool.EditFile{}, env, map[string]any{"path": "a.txt", "old_string": "beta", "new_string": "gamma"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Via != tool.ViaEditor || ed.buffers[p] != "alpha\ngamma\n" || readDisk(t, p) != "alpha\ngamma\n" {
			t.Fatalf("save %v: via %q, buffer %q, disk %q", save, res.Via, ed.buffers[p], readDisk(t, p))
		}
		if !strings.Contains(res.Change.Diff, "+gamma") || !strings.Contains(res.Change.Diff, "-beta") {
			t.Fatalf("the diff is not the buffer's:\n%s", res.Change.Diff)
		}
		if !save && !strings.Contains(res.Summary, "the server wrote it on disk") {
			t.Fatalf("summary %q", res.Summary)
		}
	}
}

// An editor that cannot be read is never written: an edit made to the
// disk's text would undo the buffer's unsaved changes.
func TestEditFileWritesThroughAnEditorOnlyAnEditMadeToItsText(t *testing.T) {
	ed := &fakeEditor{caps: editor.Caps{WriteTextFile: true}, buffers: map[string]string{}}
	env, ws := editorEnv(t, ed, map[string]string{"a.txt": "alpha\n"})
	res, err := run(t, tool.EditFile{}, env, map[string]any{"path": "a.txt", "old_string": "alpha", "new_string": "omega"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Via != tool.ViaDisk || len(ed.requests) != 0 || readDisk(t, filepath.Join(ws, "a.txt")) != "omega\n" {
		t.Fatalf("via %q, requests %v", res.Via, ed.requests)
	}
}

// The editor writes with its own rights: a path the disk checks refuse
// never reaches it.
func TestTheEditorIsNeverAskedOutsideTheWorkspace(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	ed := &fakeEditor{caps: bothCaps, save: true}
	env, ws := editorEnv(t, ed, nil)
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "dir")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tl    tool.Tool
		input map[string]any
	}{
		{tool.ReadFile{}, map[string]any{"path": "../x"}},
		{tool.ReadFile{}, map[string]any{"path": "link"}},
		{tool.WriteFile{}, map[string]any{"path": "link", "content": "x"}},
		{tool.WriteFile{}, map[string]any{"path": "dir/new", "content": "x"}},
		{tool.EditFile{}, map[string]any{"path": "link", "old_string": "s", "new_string": "t"}},
	} {
		if _, err := run(t, c.tl, env, c.input); err == nil {
			t.Errorf("%s %v: no error", c.tl.Spec().Name, c.input)
		}
	}
	if len(ed.requests) != 0 {
		t.Fatalf("the editor was asked: %v", ed.requests)
	}
	if readDisk(t, filepath.Join(outside, "secret")) != "s" {
		t.Fatal("the file outside changed")
	}
}

// Preview (the diff an approval shows) is made from the buffer too.
func TestEditFilePreviewIsMadeFromTheBuffer(t *testing.T) {
	ed := &fakeEditor{caps: bothCaps, buffers: map[string]string{}}
	env, ws := editorEnv(t, ed, map[string]string{"a.txt": "alpha\n"})
	ed.buffers[filepath.Join(ws, "a.txt")] = "alpha\nbeta\n"
	in, _ := json.Marshal(map[string]any{"path": "a.txt", "old_string": "beta", "new_string": "gamma"})
	ch, err := tool.EditFile{}.Preview(context.Background(), env, in)
	if err != nil || !strings.Contains(ch.Diff, "+gamma") {
		t.Fatalf("%v\n%s", err, ch.Diff)
	}
}
