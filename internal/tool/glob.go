package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/metis-agent/metis/internal/model"
)

// MaxGlobResults is the most paths glob returns; the result says how
// many more matched.
const MaxGlobResults = 100

// Glob finds workspace files by name pattern (glob).
type Glob struct{}

// Spec implements Tool.
func (Glob) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "glob",
		Description: "Find files of the workspace whose path matches a glob pattern, newest first. The pattern is matched against the path relative to `path` (the workspace by default): " +
			"'*' matches within one directory, '**' any number of directories, '?' one character, '[abc]' and '{a,b}' alternatives; so '*.go' finds Go files at the top only and '**/*.go' in every directory. " +
			"Files that .gitignore ignores, and .git, are left out. At most 100 paths are returned.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"glob pattern, e.g. **/*.ts or src/**/test_*.py"},` +
			`"path":{"type":"string","description":"directory to search, relative to the workspace (default: the workspace)"}},` +
			`"required":["pattern"]}`)}
}

// Kind implements Classified.
func (Glob) Kind() Kind { return KindRead }

type globInput struct {
	Pattern *string `json:"pattern"`
	Path    string  `json:"path"`
}

// Targets implements Targeted: the directory searched.
func (Glob) Targets(input json.RawMessage) ([]string, error) { return searchTargets(input) }

// searchTargets returns the path a search tool's input names (the
// workspace, ".", by default).
func searchTargets(input json.RawMessage) ([]string, error) {
	var in struct {
		Path string `json:"path"`
	}
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return nil, err
	}
	return []string{p}, nil
}

// checkGlob validates a doublestar pattern given by the model and
// returns it relative, without a leading "./". what names it in errors.
func checkGlob(env Env, pattern, what string) (string, error) {
	if len(pattern) > maxPathBytes {
		return "", Errorf(ClassInvalidInput, "%s is %d bytes long; the limit is %d", what, len(pattern), maxPathBytes)
	}
	if strings.ContainsRune(pattern, 0) {
		return "", Errorf(ClassInvalidInput, "%s contains a NUL byte", what)
	}
	if filepath.IsAbs(pattern) {
		ws := filepath.Clean(env.Workspace)
		if env.Workspace == "" || !strings.HasPrefix(pattern, ws+"/") {
			return "", Errorf(ClassInvalidInput, "%s %q is absolute and outside the workspace; patterns are relative to the workspace", what, pattern)
		}
		pattern = pattern[len(ws)+1:]
	}
	for strings.HasPrefix(pattern, "./") {
		pattern = strings.TrimLeft(pattern[2:], "/")
	}
	for _, seg := range strings.Split(pattern, "/") {
		if seg == ".." {
			return "", Errorf(ClassInvalidInput, "%s %q leaves the workspace: '..' is not allowed in it (give path instead)", what, pattern)
		}
	}
	if !doublestar.ValidatePattern(pattern) {
		return "", Errorf(ClassInvalidInput, "%s %q is not a valid glob: check its brackets [..] and braces {..}", what, pattern)
	}
	return pattern, nil
}

// searchBase resolves the path a search tool is given: a directory (or,
// if file is true, a file) in the workspace.
func searchBase(env Env, p string, file bool) (string, fs.FileInfo, error) {
	c, err := cleanPath(p)
	if err != nil {
		return "", nil, err
	}
	c = resolvePath(env, c)
	fi, err := env.Root.Stat(c)
	if err != nil {
		return "", nil, fsError("search", p, err)
	}
	if !fi.IsDir() && !(file && fi.Mode().IsRegular()) {
		if file {
			return "", nil, Errorf(ClassInvalidInput, "search %s: not a directory or a regular file", p)
		}
		return "", nil, Errorf(ClassInvalidInput, "search %s: not a directory", p)
	}
	return c, fi, nil
}

// found is a file a search found.
type found struct {
	path  string
	mtime time.Time
}

// newestFirst orders by modification time, newest first, then by path.
func newestFirst(fs []found) {
	sort.Slice(fs, func(i, j int) bool {
		if !fs[i].mtime.Equal(fs[j].mtime) {
			return fs[i].mtime.After(fs[j].mtime)
		}
		return fs[i].path < fs[j].path
	})
}

// count writes n and the noun, plural unless n is 1: "1 file", "3 files".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// relTo returns the workspace-relative rel relative to base.
func relTo(base, rel string) string {
	if base == "." {
		return rel
	}
	return strings.TrimPrefix(rel, base+"/")
}

// Run implements Tool.
func (Glob) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	var in globInput
	if err := decodeInput(input, &in); err != nil {
		return Result{}, err
	}
	if in.Pattern == nil || *in.Pattern == "" {
		return Result{}, Errorf(ClassInvalidInput, "pattern is required, e.g. **/*.go")
	}
	pattern, err := checkGlob(env, *in.Pattern, "pattern")
	if err != nil {
		return Result{}, err
	}
	base, _, err := searchBase(env, in.Path, false)
	if err != nil {
		return Result{}, err
	}
	// Start the walk at the pattern's fixed directories.
	start := base
	if dir, _ := doublestar.SplitPattern(pattern); dir != "." {
		start = path.Join(base, dir)
		fi, err := env.Root.Stat(start)
		switch {
		case isEscape(err):
			return Result{}, fsError("search", dir, err)
		case err != nil || !fi.IsDir():
			return globResult(nil, pattern, in.Path, walkStats{}), nil
		}
	}
	var matches []found
	stats, err := walkFiles(ctx, env, start, func(f walkFile) error {
		defer f.done()
		rel := relTo(base, f.rel)
		if ok, _ := doublestar.Match(pattern, rel); !ok {
			return nil
		}
		fi, err := f.info(env)
		if err != nil {
			return nil // gone meanwhile
		}
		matches = append(matches, found{path: f.rel, mtime: fi.ModTime()})
		return nil
	})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return Result{}, err
		}
		return Result{}, fsError("search", in.Path, err)
	}
	return globResult(matches, pattern, in.Path, stats), nil
}

func globResult(matches []found, pattern, where string, stats walkStats) Result {
	if where == "" {
		where = "the workspace"
	}
	newestFirst(matches)
	var sb strings.Builder
	for i, m := range matches {
		if i == MaxGlobResults {
			fmt.Fprintf(&sb, "[%d more files match, not shown: narrow the pattern, or give a path]\n", len(matches)-MaxGlobResults)
			break
		}
		sb.WriteString(m.path)
		sb.WriteByte('\n')
	}
	if stats.stopped {
		fmt.Fprintf(&sb, "[the search stopped after %d entries: give a narrower path]\n", maxWalkEntries)
	}
	sum := fmt.Sprintf("%s match %s in %s", count(len(matches), "file"), pattern, where)
	if len(matches) == 0 {
		return Result{Content: fmt.Sprintf("no files match %s in %s", pattern, where) + "\n" + sb.String(), Summary: sum}
	}
	return Result{Content: sb.String(), Summary: sum}
}
