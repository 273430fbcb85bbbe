package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// workspace returns a fresh workspace and its Env.
func workspace(t *testing.T) (string, tool.Env) {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws, newEnv(t, ws)
}

func TestReadFileDirectoryIsInvalidInput(t *testing.T) {
	ws, env := workspace(t)
	if err := os.MkdirAll(filepath.Join(ws, "d", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d", "d/", "d/e", "."} {
		_, err := run(t, tool.ReadFile{}, env, map[string]string{"path": p})
		wantClass(t, err, tool.ClassInvalidInput)
		if !strings.Contains(err.Error(), "directory") {
			t.Errorf("read %q: error %q does not say it is a directory", p, err)
		}
	}
	_, err := run(t, tool.ReadFile{}, env, map[string]string{"path": ""})
	wantClass(t, err, tool.ClassInvalidInput)
}

func TestMissingIsNotFound(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "present.txt"), "here")
	mustSymlink(t, "nowhere", filepath.Join(ws, "broken"))
	for _, c := range []struct {
		tl   tool.Tool
		path string
	}{
		{tool.ReadFile{}, "nope.txt"},
		{tool.ReadFile{}, "nodir/nope.txt"},
		{tool.ReadFile{}, "broken"},
		{tool.ListDir{}, "nodir"},
		{tool.ListDir{}, "nodir/deeper"},
		{tool.ListDir{}, "broken"},
		{tool.WriteFile{}, "nodir/new.txt"},
	} {
		_, err := run(t, c.tl, env, map[string]string{"path": c.path, "content": "x"})
		if tool.ClassOf(err) != tool.ClassNotFound {
			t.Errorf("%s %q: err = %v, want not_found", c.tl.Spec().Name, c.path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "nodir")); !os.IsNotExist(err) {
		t.Errorf("write_file created a parent directory (%v)", err)
	}
}

func TestReadFileCap(t *testing.T) {
	ws, env := workspace(t)

	// A file bigger than the cap, with a recognisable pattern.
	big := make([]byte, tool.MaxReadBytes+1000)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	mustWrite(t, filepath.Join(ws, "big.txt"), string(big))
	res, err := run(t, tool.ReadFile{}, env, map[string]string{"path": "big.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Content, string(big[:tool.MaxReadBytes])) {
		t.Fatalf("content does not start with the first MaxReadBytes bytes")
	}
	note := res.Content[tool.MaxReadBytes:]
	if strings.Contains(note, string(big[tool.MaxReadBytes:tool.MaxReadBytes+10])) {
		t.Errorf("content includes bytes past the cap: %q", note)
	}
	if !strings.Contains(strings.ToLower(note), "truncated") {
		t.Errorf("truncation note %q does not say truncated", note)
	}
	if len(note) > 200 {
		t.Errorf("truncation note is %d bytes; content past the cap should be only the note", len(note))
	}
	if !strings.Contains(res.Summary, "truncated") {
		t.Errorf("summary %q does not say truncated", res.Summary)
	}

	// Exactly at the cap: no truncation, no note.
	mustWrite(t, filepath.Join(ws, "exact.txt"), string(big[:tool.MaxReadBytes]))
	res, err = run(t, tool.ReadFile{}, env, map[string]string{"path": "exact.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != string(big[:tool.MaxReadBytes]) {
		t.Errorf("file of exactly MaxReadBytes: got %d bytes (%q...)", len(res.Content), res.Content[len(res.Content)-40:])
	}
	if strings.Contains(res.Summary, "truncated") {
		t.Errorf("summary %q says truncated for a file at the cap", res.Summary)
	}

	// Small and empty files come back verbatim.
	mustWrite(t, filepath.Join(ws, "small.txt"), "line1\nline2\n")
	mustWrite(t, filepath.Join(ws, "empty.txt"), "")
	for p, want := range map[string]string{"small.txt": "line1\nline2\n", "empty.txt": ""} {
		res, err := run(t, tool.ReadFile{}, env, map[string]string{"path": p})
		if err != nil || res.Content != want {
			t.Errorf("read %s = %q, %v; want %q", p, res.Content, err, want)
		}
	}
}

func TestListDirMarksDirsAndSorts(t *testing.T) {
	ws, env := workspace(t)
	for _, f := range []string{"b.txt", "C.txt", "_x", "a.go"} {
		mustWrite(t, filepath.Join(ws, f), f)
	}
	for _, d := range []string{"z", "a", "mid/inner"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	res, err := run(t, tool.ListDir{}, env, map[string]string{"path": "."})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{"C.txt", "_x", "a.go", "a/", "b.txt", "mid/", "z/"}, "\n")
	// sort.Strings order of the marked names.
	got := strings.Split(res.Content, "\n")
	if !sort.StringsAreSorted(got) {
		t.Errorf("listing not sorted: %q", got)
	}
	wantSet := strings.Split(want, "\n")
	sort.Strings(wantSet)
	if strings.Join(got, "\n") != strings.Join(wantSet, "\n") {
		t.Errorf("listing = %q, want %q", got, wantSet)
	}
	if strings.Contains(res.Content, "inner") {
		t.Errorf("listing recursed: %q", res.Content)
	}

	// An empty directory lists as empty content, not an error.
	res, err = run(t, tool.ListDir{}, env, map[string]string{"path": "z"})
	if err != nil || res.Content != "" {
		t.Errorf("list empty dir = %q, %v", res.Content, err)
	}
	// A missing path key lists the root, like ".".
	res2, err := tool.ListDir{}.Run(context.Background(), env, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res3, _ := run(t, tool.ListDir{}, env, map[string]string{"path": "."})
	if res2.Content != res3.Content {
		t.Errorf("list {} = %q, list . = %q", res2.Content, res3.Content)
	}
}

func TestListDirOfFile(t *testing.T) {
	ws, env := workspace(t)
	mustWrite(t, filepath.Join(ws, "f.txt"), "x")
	_, err := run(t, tool.ListDir{}, env, map[string]string{"path": "f.txt"})
	wantClass(t, err, tool.ClassInvalidInput)
}

func TestListDirCap(t *testing.T) {
	for _, n := range []int{tool.MaxListEntries, tool.MaxListEntries + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			ws, env := workspace(t)
			made := map[string]bool{}
			for i := 0; i < n; i++ {
				name := fmt.Sprintf("f%05d", i)
				f, err := os.Create(filepath.Join(ws, name))
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
				made[name] = true
			}
			res, err := run(t, tool.ListDir{}, env, map[string]string{"path": "."})
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(res.Content, "\n")
			truncated := n > tool.MaxListEntries
			wantLines := n
			if truncated {
				wantLines = tool.MaxListEntries + 1
			}
			if len(lines) != wantLines {
				t.Fatalf("%d lines, want %d", len(lines), wantLines)
			}
			entries := lines
			if truncated {
				entries = lines[:tool.MaxListEntries]
				last := lines[len(lines)-1]
				if !strings.Contains(last, "truncated") || !strings.Contains(last, fmt.Sprint(tool.MaxListEntries)) {
					t.Errorf("truncation note = %q", last)
				}
			} else if strings.Contains(res.Content, "truncated") {
				t.Errorf("listing of exactly MaxListEntries says truncated")
			}
			seen := map[string]bool{}
			for _, e := range entries {
				if !made[e] || seen[e] {
					t.Fatalf("unexpected or repeated entry %q", e)
				}
				seen[e] = true
			}
			if !sort.StringsAreSorted(entries) {
				t.Errorf("entries not sorted")
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	ws, env := workspace(t)
	onDisk := func(rel string) (string, error) {
		b, err := os.ReadFile(filepath.Join(ws, rel))
		return string(b), err
	}

	t.Run("creates", func(t *testing.T) {
		res, err := run(t, tool.WriteFile{}, env, map[string]string{"path": "new.txt", "content": "hello\n"})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := onDisk("new.txt"); err != nil || got != "hello\n" {
			t.Fatalf("on disk = %q, %v", got, err)
		}
		if !strings.Contains(res.Content, "6 bytes") {
			t.Errorf("result = %q", res.Content)
		}
		fi, _ := os.Stat(filepath.Join(ws, "new.txt"))
		if fi.Mode().Perm()&0o600 != 0o600 {
			t.Errorf("mode = %v", fi.Mode())
		}
	})
	t.Run("overwrites and truncates", func(t *testing.T) {
		mustWrite(t, filepath.Join(ws, "over.txt"), "a much longer original content")
		if _, err := run(t, tool.WriteFile{}, env, map[string]string{"path": "over.txt", "content": "short"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := onDisk("over.txt"); got != "short" {
			t.Errorf("on disk = %q", got)
		}
		if _, err := run(t, tool.WriteFile{}, env, map[string]string{"path": "over.txt", "content": ""}); err != nil {
			t.Fatal(err)
		}
		if got, _ := onDisk("over.txt"); got != "" {
			t.Errorf("after empty write = %q", got)
		}
	})
	t.Run("size cap", func(t *testing.T) {
		// Raw JSON: the content needs no escaping, and marshalling 8 MiB
		// is slow under -race.
		atCap := strings.Repeat("x", tool.MaxWriteBytes)
		big := func(path, content string) error {
			_, err := tool.WriteFile{}.Run(context.Background(), env, json.RawMessage(`{"path":"`+path+`","content":"`+content+`"}`))
			return err
		}
		if err := big("cap.txt", atCap); err != nil {
			t.Fatalf("content of exactly MaxWriteBytes: %v", err)
		}
		if fi, err := os.Stat(filepath.Join(ws, "cap.txt")); err != nil || fi.Size() != tool.MaxWriteBytes {
			t.Fatalf("cap.txt: %v, %v", fi, err)
		}
		mustWrite(t, filepath.Join(ws, "keep.txt"), "original")
		over := atCap + "y"
		for _, p := range []string{"toobig.txt", "keep.txt"} {
			wantClass(t, big(p, over), tool.ClassInvalidInput)
		}
		if _, err := os.Stat(filepath.Join(ws, "toobig.txt")); !os.IsNotExist(err) {
			t.Errorf("rejected write created its file (%v)", err)
		}
		if got, _ := onDisk("keep.txt"); got != "original" {
			t.Errorf("rejected write modified the file: %q", got)
		}
	})
	t.Run("trailing slash", func(t *testing.T) {
		if err := os.Mkdir(filepath.Join(ws, "adir"), 0o755); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(ws, "afile"), "keep")
		for _, p := range []string{"newdir/", "adir/", "afile/", "a/b/"} {
			_, err := run(t, tool.WriteFile{}, env, map[string]string{"path": p, "content": "x"})
			wantClass(t, err, tool.ClassInvalidInput)
		}
		for _, p := range []string{"newdir", "a"} {
			if _, err := os.Lstat(filepath.Join(ws, p)); !os.IsNotExist(err) {
				t.Errorf("%s created (%v)", p, err)
			}
		}
		if got, _ := onDisk("afile"); got != "keep" {
			t.Errorf("afile = %q", got)
		}
	})
	t.Run("directory target", func(t *testing.T) {
		if err := os.MkdirAll(filepath.Join(ws, "isdir"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"isdir", ".", ""} {
			_, err := run(t, tool.WriteFile{}, env, map[string]string{"path": p, "content": "x"})
			wantClass(t, err, tool.ClassInvalidInput)
		}
		if fi, err := os.Stat(filepath.Join(ws, "isdir")); err != nil || !fi.IsDir() {
			t.Errorf("isdir damaged: %v %v", fi, err)
		}
	})
	t.Run("missing content", func(t *testing.T) {
		// content is required by the schema; an absent one decodes as "".
		// Whatever the tool decides, it must not fail on the path side.
		_, err := tool.WriteFile{}.Run(context.Background(), env, json.RawMessage(`{"path":"nocontent.txt"}`))
		if err != nil && tool.ClassOf(err) != tool.ClassInvalidInput {
			t.Errorf("err = %v", err)
		}
	})
}

func TestMalformedInput(t *testing.T) {
	_, env := workspace(t)
	inputs := []string{
		`{"path": 5}`,
		`{"path": ["a"]}`,
		`{"path": {"x": 1}}`,
		`{"path": true}`,
		`not json`,
		`[]`,
		`"path"`,
		`42`,
		`{"path": "x"`,
		`{"path": "x"} trailing`,
	}
	for _, tl := range fileTools() {
		for _, in := range inputs {
			res, err := tl.Run(context.Background(), env, json.RawMessage(in))
			if err == nil {
				t.Errorf("%s %s: no error (result %+v)", tl.Spec().Name, in, res)
				continue
			}
			wantClass(t, err, tool.ClassInvalidInput)
		}
	}
	for _, in := range []string{`{"path":"x","content":5}`, `{"path":"x","content":null,"content":[1]}`, `{"path":"x","content":{"a":1}}`} {
		_, err := tool.WriteFile{}.Run(context.Background(), env, json.RawMessage(in))
		wantClass(t, err, tool.ClassInvalidInput)
	}
	if _, err := os.Stat(filepath.Join(env.Workspace, "x")); !os.IsNotExist(err) {
		t.Errorf("malformed write created x (%v)", err)
	}
}

func TestRegistrySpecs(t *testing.T) {
	r := tool.NewRegistry(tool.WriteFile{}, tool.Shell{}, tool.ListDir{}, tool.ReadFile{}, tool.EditFile{}, tool.ApplyPatch{},
		tool.Glob{}, tool.Grep{}, tool.WebFetch{})
	specs := r.Specs()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "apply_patch,edit_file,glob,grep,list_dir,read_file,shell,web_fetch,write_file" {
		t.Fatalf("Specs names = %v", names)
	}
	// Builtins gives the same set.
	var bn []string
	for _, b := range tool.Builtins() {
		bn = append(bn, b.Spec().Name)
	}
	sort.Strings(bn)
	if strings.Join(bn, ",") != strings.Join(names, ",") {
		t.Errorf("Builtins = %v", bn)
	}
	for _, s := range specs {
		if s.Description == "" {
			t.Errorf("%s: empty description", s.Name)
		}
		if !json.Valid(s.InputSchema) {
			t.Errorf("%s: InputSchema is not valid JSON: %s", s.Name, s.InputSchema)
			continue
		}
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if schema.Type != "object" {
			t.Errorf("%s: type %q", s.Name, schema.Type)
		}
		key := map[string]string{"shell": "command", "apply_patch": "patch", "web_fetch": "url", "glob": "pattern", "grep": "pattern"}[s.Name]
		if key == "" {
			key = "path"
		}
		if _, ok := schema.Properties[key]; !ok {
			t.Errorf("%s: no %s property", s.Name, key)
		}
		for _, req := range schema.Required {
			if _, ok := schema.Properties[req]; !ok {
				t.Errorf("%s: required %q is not a property", s.Name, req)
			}
		}
		// The whole spec marshals (it is sent to providers).
		if _, err := json.Marshal(s); err != nil {
			t.Errorf("%s: marshal spec: %v", s.Name, err)
		}
	}
	if got, ok := r.Get("read_file"); !ok || got.Spec().Name != "read_file" {
		t.Errorf("Get(read_file) = %v, %v", got, ok)
	}
	if _, ok := r.Get("delegate"); ok {
		t.Errorf("Get(delegate) found an unregistered tool")
	}
	// Register replaces by name.
	r.Register(tool.ReadFile{})
	if len(r.Specs()) != 9 {
		t.Errorf("re-registering changed the count: %d", len(r.Specs()))
	}
	if len(tool.NewRegistry().Specs()) != 0 {
		t.Errorf("empty registry has specs")
	}
}

func TestClassOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{tool.Errorf(tool.ClassNotFound, "x"), tool.ClassNotFound},
		{fmt.Errorf("wrapped: %w", tool.Errorf(tool.ClassPermissionDenied, "x")), tool.ClassPermissionDenied},
		{context.Canceled, tool.ClassCancelled},
		{fmt.Errorf("w: %w", context.DeadlineExceeded), tool.ClassTimeout},
		{os.ErrNotExist, tool.ClassExecution},
	} {
		if got := tool.ClassOf(c.err); got != c.want {
			t.Errorf("ClassOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if e := tool.Errorf(tool.ClassTimeout, "took %ds", 3); e.Error() != "timeout: took 3s" {
		t.Errorf("Error() = %q", e.Error())
	}
}
