package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// newEnv opens an os.Root on ws and returns the Env a tool call gets.
func newEnv(t testing.TB, ws string) tool.Env {
	t.Helper()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatalf("OpenRoot(%s): %v", ws, err)
	}
	t.Cleanup(func() { root.Close() })
	return tool.Env{Root: root, Workspace: ws, SessionID: "ses_test", TurnID: "trn_test"}
}

// run calls t with input marshalled to JSON.
func run(t *testing.T, tl tool.Tool, env tool.Env, input any) (tool.Result, error) {
	t.Helper()
	b, err := json.Marshal(input)
	if err != nil {
		t.Fatalf("marshal input: %v", err)
	}
	return tl.Run(context.Background(), env, b)
}

// wantClass asserts err is a *tool.Error of class want.
func wantClass(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %s", want)
	}
	var te *tool.Error
	if !errors.As(err, &te) {
		t.Fatalf("err = %T %v, want *tool.Error", err, err)
	}
	if te.Class != want || tool.ClassOf(err) != want {
		t.Fatalf("class = %q (ClassOf %q), want %q; err: %v", te.Class, tool.ClassOf(err), want, err)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatalf("symlink %s -> %s: %v", link, target, err)
	}
}

// snapshot records every entry under dir (without following symlinks):
// its type, its content for files, its target for symlinks.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			tgt, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "symlink -> " + tgt
		case d.IsDir():
			out[rel] = "dir " + info.Mode().String()
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = info.Mode().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return out
}

func diffSnapshots(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if a, ok := after[k]; !ok {
			t.Errorf("%s: %s was removed", what, k)
		} else if a != v {
			t.Errorf("%s: %s changed: %q -> %q", what, k, v, a)
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s was created (%q)", what, k, v)
		}
	}
}
