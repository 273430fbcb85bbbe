package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"

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

// Builtins returns the built-in tools: the file tools and shell.
func Builtins() []Tool { return []Tool{ListDir{}, ReadFile{}, WriteFile{}, Shell{}} }

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
	return model.ToolSpec{Name: "read_file", Description: "Read a text file in the workspace.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"file relative to the workspace"}},"required":["path"]}`)}
}

// Run implements Tool.
func (ReadFile) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	var in struct {
		Path string `json:"path"`
	}
	if err := decodeInput(input, &in); err != nil {
		return Result{}, err
	}
	if in.Path == "" {
		return Result{}, Errorf(ClassInvalidInput, "path is required")
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
	b, err := io.ReadAll(io.LimitReader(f, MaxReadBytes+1))
	if err != nil {
		return Result{}, fsError("read", in.Path, err)
	}
	out := string(b)
	sum := fmt.Sprintf("read %d bytes of %s", len(b), p)
	if len(b) > MaxReadBytes {
		out = string(b[:MaxReadBytes]) + fmt.Sprintf("\n[file truncated: only the first %d bytes are shown]", MaxReadBytes)
		sum = fmt.Sprintf("read first %d bytes of %s (truncated)", MaxReadBytes, p)
	}
	return Result{Content: out, Summary: sum}, nil
}

// WriteFile writes a workspace file, creating or replacing it.
type WriteFile struct{}

// Spec implements Tool.
func (WriteFile) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "write_file", Description: "Create or overwrite a file in the workspace with the given content.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)}
}

// Run implements Tool.
func (WriteFile) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	var in struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := decodeInput(input, &in); err != nil {
		return Result{}, err
	}
	if in.Path == "" {
		return Result{}, Errorf(ClassInvalidInput, "path is required")
	}
	if len(in.Content) > MaxWriteBytes {
		return Result{}, Errorf(ClassInvalidInput, "content is %d bytes; the limit is %d", len(in.Content), MaxWriteBytes)
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return Result{}, err
	}
	p = resolvePath(env, p)
	if strings.HasSuffix(in.Path, "/") {
		// Confinement comes first (spec §5): "link/" through a symlink
		// leading out is permission_denied, not merely a bad path.
		if _, err := env.Root.Stat(p); isEscape(err) {
			return Result{}, fsError("write", in.Path, err)
		}
		return Result{}, Errorf(ClassInvalidInput, "write %s: path names a directory", in.Path)
	}
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
	return Result{Content: fmt.Sprintf("wrote %d bytes to %s", len(in.Content), p), Summary: fmt.Sprintf("wrote %d bytes to %s", len(in.Content), p)}, nil
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
