package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// Kind says why a checkpoint was taken.
type Kind string

// Kinds of checkpoints.
const (
	// KindTurn: before a turn first changed the workspace, or after the
	// turn (the two bound the turn's changes).
	KindTurn Kind = "turn"
	// KindRevert: the files as they were just before a restore, so that
	// the restore can be undone.
	KindRevert Kind = "revert"
)

// Reasons a path was left out of a snapshot (Skip.Reason).
const (
	// SkipTooLarge: a file over the size limit.
	SkipTooLarge = "too_large"
	// SkipTooManyFiles: a directory whose new files would have passed
	// the cap on new files per snapshot.
	SkipTooManyFiles = "too_many_files"
	// SkipNestedRepository: a directory holding a git repository of its
	// own (a nested clone or submodule).
	SkipNestedRepository = "nested_repository"
	// SkipNotAFile: a FIFO, socket or device.
	SkipNotAFile = "not_a_file"
	// SkipCollapsed: more paths were left out than a checkpoint lists;
	// this directory holds some of them.
	SkipCollapsed = "collapsed"
)

// Skip is a path a snapshot left out: it existed but is not in the
// checkpoint, so a restore of the checkpoint deletes nothing at or
// under it. Path is relative to the workspace,
// slash-separated ("." for the whole workspace).
type Skip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Bytes  int64  `json:"bytes,omitempty"` // too_large: the file's size
	Files  int    `json:"files,omitempty"` // too_many_files: the new files left out
}

// MaxSkips bounds the paths a checkpoint lists as left out; past it,
// paths are replaced by their directories.
const MaxSkips = 1000

// Checkpoint is a snapshot taken.
type Checkpoint struct {
	ID     string
	Kind   Kind
	Commit string // the git commit (internal to the store)
	// Staged counts the paths whose content differed from the previous
	// snapshot of the workspace: 0 when nothing changed since.
	Staged   int
	Skipped  []Skip
	Duration time.Duration
}

// meta is what a checkpoint's commit records besides its tree.
type meta struct {
	Kind      Kind   `json:"kind"`
	Workspace string `json:"workspace"`
	Skipped   []Skip `json:"skipped,omitempty"`
}

// commitSubject starts every checkpoint's commit message.
const commitSubject = "metis checkpoint"

// Snapshot takes a checkpoint of workspace's files: every file that is
// not ignored (the workspace's .gitignore files and .git/info/exclude)
// nor left out (see Skip), with its bytes, executable bit and symlink
// target.
func (s *Store) Snapshot(ctx context.Context, workspace string, kind Kind) (Checkpoint, error) {
	r, err := s.open(ctx, workspace)
	if err != nil {
		return Checkpoint{}, err
	}
	defer r.close()
	return r.snapshot(ctx, kind)
}

// entry is one path git listed as changed since the index.
type entry struct {
	path    string
	tracked bool // in the index (modified or removed)
	other   bool // not in the index, not ignored
}

func (r *repo) snapshot(ctx context.Context, kind Kind) (Checkpoint, error) {
	start := time.Now()
	if err := r.syncExclude(); err != nil {
		return Checkpoint{}, err
	}
	out, err := r.g.run(ctx, nil, nil, "ls-files", "-z", "-t", "--others", "--modified", "--deleted", "--exclude-standard")
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: list changes: %w", err)
	}
	entries := parseLsFiles(out)
	add, remove, skipped, news := r.classify(entries)
	if len(news) > r.s.opts.MaxNewFiles {
		var left []Skip
		news, left = capNew(news, r.s.opts.MaxNewFiles)
		skipped = append(skipped, left...)
		out := map[string]bool{}
		for _, p := range news {
			out[p] = true
		}
		kept := add[:0]
		for _, e := range add {
			if e.tracked || out[e.path] {
				kept = append(kept, e)
			}
		}
		add = kept
	}
	if len(remove) > 0 {
		if _, err := r.g.run(ctx, nulJoin(remove), nil, "update-index", "-z", "--force-remove", "--stdin"); err != nil {
			return Checkpoint{}, fmt.Errorf("checkpoint: stage removals: %w", err)
		}
	}
	if len(add) > 0 {
		paths := make([]string, len(add))
		for i, e := range add {
			paths[i] = e.path
		}
		if _, err := r.g.run(ctx, nulJoin(paths), nil, "update-index", "-z", "--add", "--replace", "--stdin"); err != nil {
			return Checkpoint{}, fmt.Errorf("checkpoint: stage files: %w", err)
		}
	}
	tree, err := r.g.run(ctx, nil, nil, "write-tree")
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: write tree: %w", err)
	}
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].Path < skipped[j].Path })
	skipped = collapse(skipped, MaxSkips)
	cp := Checkpoint{ID: "ckpt_" + ulid.Make().String(), Kind: kind, Staged: len(add) + len(remove), Skipped: skipped}
	if cp.Commit, err = r.commit(ctx, strings.TrimSpace(string(tree)), meta{Kind: kind, Workspace: r.ws, Skipped: skipped}); err != nil {
		return Checkpoint{}, err
	}
	if _, err := r.g.run(ctx, nil, nil, "update-ref", refOf(cp.ID), cp.Commit); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: record %s: %w", cp.ID, err)
	}
	cp.Duration = time.Since(start)
	return cp, nil
}

// commit writes a parentless commit of tree carrying m.
func (r *repo) commit(ctx context.Context, tree string, m meta) (string, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	msg := commitSubject + " " + string(m.Kind) + "\n\n" + string(body) + "\n"
	out, err := r.g.run(ctx, []byte(msg), nil, "commit-tree", tree, "-F", "-")
	if err != nil {
		return "", fmt.Errorf("checkpoint: commit: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// metaOf reads what commit records.
func (r *repo) metaOf(ctx context.Context, commit string) (meta, error) {
	out, err := r.g.run(ctx, nil, nil, "cat-file", "commit", commit)
	if err != nil {
		return meta{}, fmt.Errorf("checkpoint: read %s: %w", commit, err)
	}
	_, msg, _ := bytes.Cut(out, []byte("\n\n"))
	_, body, _ := bytes.Cut(msg, []byte("\n\n"))
	var m meta
	if err := json.Unmarshal(bytes.TrimSpace(body), &m); err != nil {
		return meta{}, fmt.Errorf("checkpoint: %s records no metadata: %w", commit, err)
	}
	return m, nil
}

// parseLsFiles reads `ls-files -z -t` output: "<tag> <path>\0" with
// tags ? (other), C (modified) and R (removed).
func parseLsFiles(out []byte) []entry {
	byPath := map[string]int{}
	var entries []entry
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) < 3 || rec[1] != ' ' {
			continue
		}
		p := string(rec[2:])
		i, ok := byPath[p]
		if !ok {
			i = len(entries)
			byPath[p] = i
			entries = append(entries, entry{path: p})
		}
		switch rec[0] {
		case '?':
			entries[i].other = true
		case 'C', 'R':
			entries[i].tracked = true
		}
	}
	return entries
}

// classify decides, per listed path, whether the snapshot stages it
// (add), drops it from the index (remove) or leaves it out (skipped),
// and lists the new files among add.
func (r *repo) classify(entries []entry) (add []entry, remove []string, skipped []Skip, news []string) {
	dirs := map[string]bool{}
	for _, e := range entries {
		if strings.HasSuffix(e.path, "/") {
			skipped = append(skipped, Skip{Path: strings.TrimSuffix(e.path, "/"), Reason: SkipNestedRepository})
			continue
		}
		fi, err := r.lstat(e.path, dirs)
		if err != nil {
			if e.tracked {
				remove = append(remove, e.path)
			}
			continue // an untracked file gone since the listing
		}
		switch mode := fi.Mode(); {
		case mode.IsDir():
			// A tracked file replaced by a directory: its files are
			// listed on their own.
			if e.tracked {
				remove = append(remove, e.path)
			}
		case mode&fs.ModeSymlink != 0:
			add = append(add, e)
		case mode.IsRegular():
			if fi.Size() > r.s.opts.MaxFileBytes {
				skipped = append(skipped, Skip{Path: e.path, Reason: SkipTooLarge, Bytes: fi.Size()})
				if e.tracked {
					remove = append(remove, e.path)
				}
				continue
			}
			add = append(add, e)
			if !e.tracked {
				news = append(news, e.path)
			}
		default:
			skipped = append(skipped, Skip{Path: e.path, Reason: SkipNotAFile})
			if e.tracked {
				remove = append(remove, e.path)
			}
		}
	}
	return add, remove, skipped, news
}

// errBeyondLink is a path whose leading directories include a symlink
// or something that is not a directory: git does not follow symlinks
// inside a work tree, and neither does a snapshot.
var errBeyondLink = errors.New("a leading path component is not a directory")

// lstat describes path inside the workspace without following a
// symlink anywhere along it. dirs caches the leading directories seen.
func (r *repo) lstat(path string, dirs map[string]bool) (fs.FileInfo, error) {
	for i := 0; i < len(path); i++ {
		if path[i] != '/' {
			continue
		}
		d := path[:i]
		ok, seen := dirs[d]
		if !seen {
			fi, err := r.root.Lstat(d)
			ok = err == nil && fi.IsDir()
			dirs[d] = ok
		}
		if !ok {
			return nil, errBeyondLink
		}
	}
	return r.root.Lstat(path)
}

// capNew keeps at most limit of the new files: it leaves out whole
// top-level directories, those with the most new files first, until the
// rest fits (new files at the top level count one each and are left out
// last, in name order).
func capNew(news []string, limit int) ([]string, []Skip) {
	counts := map[string]int{}
	for _, p := range news {
		counts[topGroup(p)]++
	}
	groups := make([]string, 0, len(counts))
	for g := range counts {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		if counts[groups[i]] != counts[groups[j]] {
			return counts[groups[i]] > counts[groups[j]]
		}
		return groups[i] < groups[j]
	})
	total := len(news)
	out := map[string]bool{}
	var skips []Skip
	for _, g := range groups {
		if total <= limit {
			break
		}
		out[g] = true
		total -= counts[g]
		skips = append(skips, Skip{Path: g, Reason: SkipTooManyFiles, Files: counts[g]})
	}
	kept := news[:0:0]
	for _, p := range news {
		if !out[topGroup(p)] {
			kept = append(kept, p)
		}
	}
	return kept, skips
}

// topGroup is the first component of a path (the path itself for a
// file at the top level).
func topGroup(p string) string {
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return p
}

// collapse replaces skips by their directories, deepest first, until at
// most limit remain; skips must be sorted by path.
func collapse(skips []Skip, limit int) []Skip {
	for len(skips) > limit {
		depth := 0
		for _, s := range skips {
			depth = max(depth, strings.Count(s.Path, "/"))
		}
		if depth == 0 {
			return []Skip{{Path: ".", Reason: SkipCollapsed, Files: len(skips)}}
		}
		var next []Skip
		seen := map[string]int{}
		for _, s := range skips {
			if strings.Count(s.Path, "/") == depth {
				d := s.Path[:strings.LastIndexByte(s.Path, '/')]
				if i, ok := seen[d]; ok {
					next[i].Files++
					continue
				}
				seen[d] = len(next)
				s = Skip{Path: d, Reason: SkipCollapsed, Files: 1}
			}
			next = append(next, s)
		}
		sort.Slice(next, func(i, j int) bool { return next[i].Path < next[j].Path })
		skips = dedupeUnder(next)
	}
	return skips
}

// dedupeUnder drops skips at or under another skip.
func dedupeUnder(skips []Skip) []Skip {
	paths := make(map[string]bool, len(skips))
	for _, s := range skips {
		paths[s.Path] = true
	}
	if paths["."] {
		return []Skip{{Path: ".", Reason: SkipCollapsed, Files: len(skips)}}
	}
	out := skips[:0]
	seen := map[string]bool{}
	for _, s := range skips {
		if seen[s.Path] || hasAncestorIn(s.Path, paths) {
			continue
		}
		seen[s.Path] = true
		out = append(out, s)
	}
	return out
}

// hasAncestorIn reports whether a proper ancestor directory of p is in
// set.
func hasAncestorIn(p string, set map[string]bool) bool {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' && set[p[:i]] {
			return true
		}
	}
	return false
}

// under reports whether p is dir or inside it ("." holds everything).
func under(p, dir string) bool {
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

// underAny reports whether p is at or under one of skips.
func underAny(p string, skips []Skip) bool {
	for _, s := range skips {
		if under(p, s.Path) {
			return true
		}
	}
	return false
}

// nulJoin joins paths for git's -z --stdin.
func nulJoin(paths []string) []byte {
	var b bytes.Buffer
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return b.Bytes()
}
