package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// benchTree returns a large tree to search: $METIS_BENCH_TREE if set,
// else a copy of the Go standard library's source made for this
// benchmark (about 150 MB, 11,000 files).
func benchTree(b *testing.B) string {
	b.Helper()
	if d := os.Getenv("METIS_BENCH_TREE"); d != "" {
		return d
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skipf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	dst := filepath.Join(b.TempDir(), "src")
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		b.Skipf("cannot copy %s: %v %s", src, err, out)
	}
	return dst
}

func benchEnv(b *testing.B, dir string) tool.Env {
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { root.Close() })
	return tool.Env{Root: root, Workspace: dir}
}

// grepPatterns are the searches measured: a literal, a regular
// expression with a literal in it, a case-insensitive word, and
// expressions of character classes only.
var grepPatterns = []struct {
	name, pattern string
	fold          bool
}{
	{"literal", "Lstat", false},
	{"regexp", `func \(\w+ \*Root\) \w+`, false},
	{"ignore_case", "newreader", true},
	{"digits", `[0-9]{12,}`, false},
	{"classes", `\b[A-Z]{4,}_[A-Z]+\b`, false},
}

// BenchmarkGrep compares grep with ripgrep (rg --hidden, to search the
// same files) on a large tree; both print every matching line.
func BenchmarkGrep(b *testing.B) {
	dir := benchTree(b)
	env := benchEnv(b, dir)
	_, rgErr := exec.LookPath("rg")
	for _, p := range grepPatterns {
		b.Run(p.name+"/metis", func(b *testing.B) {
			in, _ := json.Marshal(map[string]any{"pattern": p.pattern, "ignore_case": p.fold})
			for b.Loop() {
				if _, err := (tool.Grep{}).Run(context.Background(), env, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(p.name+"/ripgrep", func(b *testing.B) {
			if rgErr != nil {
				b.Skip("rg is not installed")
			}
			args := []string{"--hidden", "-n", "--no-heading"}
			if p.fold {
				args = append(args, "-i")
			}
			args = append(args, "-e", p.pattern, ".")
			for b.Loop() {
				cmd := exec.Command("rg", args...)
				cmd.Dir, cmd.Stdout = dir, io.Discard
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGlob compares glob with find and rg --files.
func BenchmarkGlob(b *testing.B) {
	dir := benchTree(b)
	env := benchEnv(b, dir)
	b.Run("metis", func(b *testing.B) {
		in := json.RawMessage(`{"pattern":"**/*_test.go"}`)
		for b.Loop() {
			if _, err := (tool.Glob{}).Run(context.Background(), env, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	for name, args := range map[string][]string{"find": {"find", ".", "-name", "*_test.go"}, "ripgrep": {"rg", "--hidden", "--files", "-g", "*_test.go"}} {
		b.Run(name, func(b *testing.B) {
			if _, err := exec.LookPath(args[0]); err != nil {
				b.Skip(err)
			}
			for b.Loop() {
				cmd := exec.Command(args[0], args[1:]...)
				cmd.Dir, cmd.Stdout = dir, io.Discard
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOneLineChange: changing one line of a 2,000-line file with
// edit_file and with write_file, in bytes of tool input (what the model
// must write) and wall time.
func BenchmarkOneLineChange(b *testing.B) {
	ws := b.TempDir()
	var sb strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&sb, "\tvalue%04d := compute(%d, \"some argument text\") // a typical line of code\n", i, i)
	}
	body := sb.String()
	p := filepath.Join(ws, "big.go")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	env := benchEnv(b, ws)
	line := "\tvalue1000 := compute(1000, \"some argument text\") // a typical line of code"
	changed := strings.Replace(line, "compute(1000,", "compute(1001,", 1)
	edits := [2]json.RawMessage{}
	edits[0], _ = json.Marshal(map[string]string{"path": "big.go", "old_string": line, "new_string": changed})
	edits[1], _ = json.Marshal(map[string]string{"path": "big.go", "old_string": changed, "new_string": line})
	writes := [2]json.RawMessage{}
	writes[0], _ = json.Marshal(map[string]string{"path": "big.go", "content": strings.Replace(body, line, changed, 1)})
	writes[1], _ = json.Marshal(map[string]string{"path": "big.go", "content": body})
	for name, c := range map[string]struct {
		tl tool.Tool
		in [2]json.RawMessage
	}{"edit_file": {tool.EditFile{}, edits}, "write_file": {tool.WriteFile{}, writes}} {
		b.Run(name, func(b *testing.B) {
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				if _, err := c.tl.Run(context.Background(), env, c.in[i%2]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(len(c.in[0])), "input-bytes")
		})
	}
}
