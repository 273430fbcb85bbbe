package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Restored is what a restore did.
type Restored struct {
	// Undo is the checkpoint of the files just before the restore
	// (KindRevert): restoring it undoes the restore.
	Undo Checkpoint
	// Restored lists the paths written back as the checkpoint holds them
	// (changed, deleted or turned into another type since).
	Restored []string
	// Removed lists the files deleted: created since the checkpoint.
	Removed []string
	// LeftAlone lists what exists but the restore did not touch: files
	// the checkpoint's ignore rules ignore, and paths left out of the
	// checkpoint or of the snapshot before the restore (see Skip).
	LeftAlone []Skip
	// Failed lists the paths that could not be restored or removed.
	Failed   []PathError
	Duration time.Duration
}

// PathError is a path a restore could not put back.
type PathError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Reasons of LeftAlone besides the Skip reasons.
const (
	// LeftIgnored: a file the checkpoint's ignore rules ignore.
	LeftIgnored = "ignored"
)

// Restore puts the workspace's files back as checkpoint id holds them.
// It first takes a checkpoint of the files as they are (Restored.Undo).
// Then files changed or deleted since are written back with their
// executable bit or symlink; files created since are deleted, with the
// directories they leave empty that the checkpoint did not hold. A file
// is never deleted if the checkpoint did not capture it although it may
// have existed: one its own ignore rules ignore, one at or under a path
// it left out. Nothing outside the workspace is touched, and no symlink
// is followed. If the files already are as the checkpoint holds them it
// fails with ErrNothingToRestore and changes nothing.
func (s *Store) Restore(ctx context.Context, workspace, id string) (Restored, error) {
	start := time.Now()
	r, err := s.open(ctx, workspace)
	if err != nil {
		return Restored{}, err
	}
	defer r.close()
	target, err := r.resolve(ctx, id)
	if err != nil {
		return Restored{}, err
	}
	tm, err := r.metaOf(ctx, target)
	if err != nil {
		return Restored{}, err
	}
	pre, err := r.snapshot(ctx, KindRevert)
	if err != nil {
		return Restored{}, fmt.Errorf("checkpoint: the files as they are could not be saved first, so the restore was not made: %w", err)
	}
	diff, err := r.changes(ctx, target, pre.Commit)
	if err != nil {
		return Restored{}, err
	}
	if len(diff) == 0 {
		_, _ = r.g.run(ctx, nil, nil, "update-ref", "-d", refOf(pre.ID))
		return Restored{}, fmt.Errorf("%w: the files already are as checkpoint %s holds them", ErrNothingToRestore, id)
	}
	res := Restored{Undo: pre}
	res.LeftAlone = append(res.LeftAlone, pre.Skipped...)
	var added, back []string
	for _, c := range diff {
		if c.Status == Added {
			if underAny(c.Path, tm.Skipped) {
				res.LeftAlone = append(res.LeftAlone, Skip{Path: c.Path, Reason: leftReason(c.Path, tm.Skipped)})
				continue
			}
			added = append(added, c.Path)
		} else {
			back = append(back, c.Path)
		}
	}
	tmpIndex := filepath.Join(r.g.dir, "metis-restore-index")
	_ = os.Remove(tmpIndex)
	defer os.Remove(tmpIndex)
	idx := []string{"GIT_INDEX_FILE=" + tmpIndex}
	if _, err := r.g.run(ctx, nil, idx, "read-tree", target); err != nil {
		return res, fmt.Errorf("checkpoint: read %s: %w", id, err)
	}
	// The ignore rules first: the .gitignore files created since go,
	// the checkpoint's come back, so that what it ignored is known.
	var addedRules, otherAdded, backRules, otherBack []string
	for _, p := range added {
		if path.Base(p) == ".gitignore" {
			addedRules = append(addedRules, p)
		} else {
			otherAdded = append(otherAdded, p)
		}
	}
	for _, p := range back {
		if path.Base(p) == ".gitignore" {
			backRules = append(backRules, p)
		} else {
			otherBack = append(otherBack, p)
		}
	}
	r.remove(addedRules, &res)
	r.checkout(ctx, idx, backRules, &res)
	ignored, err := r.ignored(ctx, otherAdded)
	if err != nil {
		return res, err
	}
	var doomed []string
	for _, p := range otherAdded {
		if ignored[p] {
			res.LeftAlone = append(res.LeftAlone, Skip{Path: p, Reason: LeftIgnored})
			continue
		}
		doomed = append(doomed, p)
	}
	r.remove(doomed, &res)
	if err := r.pruneDirs(ctx, target, append(addedRules, doomed...)); err != nil {
		return res, err
	}
	r.checkout(ctx, idx, otherBack, &res)
	sort.Strings(res.Restored)
	sort.Strings(res.Removed)
	res.Duration = time.Since(start)
	return res, nil
}

// leftReason is the reason of the skip p is under.
func leftReason(p string, skips []Skip) string {
	for _, s := range skips {
		if under(p, s.Path) {
			return s.Reason
		}
	}
	return SkipCollapsed
}

// ignored returns which of paths the workspace's ignore rules, as they
// are now, ignore.
func (r *repo) ignored(ctx context.Context, paths []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(paths) == 0 {
		return out, nil
	}
	res, err := r.g.run(ctx, nulJoin(paths), nil, "check-ignore", "--no-index", "-z", "--stdin")
	if err != nil && !isExit(err, 1) { // 1: none is ignored
		return nil, fmt.Errorf("checkpoint: check ignored files: %w", err)
	}
	for _, p := range strings.Split(string(res), "\x00") {
		if p != "" {
			out[p] = true
		}
	}
	return out, nil
}

// remove deletes files (never directories, never through a symlink).
func (r *repo) remove(paths []string, res *Restored) {
	dirs := map[string]bool{}
	for _, p := range paths {
		fi, err := r.lstat(p, dirs)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errBeyondLink) {
				res.Failed = append(res.Failed, PathError{Path: p, Message: err.Error()})
			}
			continue // gone already
		}
		if fi.IsDir() {
			continue // a nested repository's directory is listed with a slash; a plain one is not ours to remove here
		}
		if err := r.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			res.Failed = append(res.Failed, PathError{Path: p, Message: err.Error()})
			continue
		}
		res.Removed = append(res.Removed, p)
	}
}

// pruneDirs removes the directories that removing paths left empty,
// from the deepest, unless the checkpoint holds them.
func (r *repo) pruneDirs(ctx context.Context, target string, removed []string) error {
	if len(removed) == 0 {
		return nil
	}
	out, err := r.g.run(ctx, nil, nil, "ls-tree", "-r", "-d", "-z", "--name-only", target)
	if err != nil {
		return fmt.Errorf("checkpoint: list directories: %w", err)
	}
	keep := map[string]bool{}
	for _, d := range strings.Split(string(out), "\x00") {
		keep[d] = true
	}
	cand := map[string]bool{}
	for _, p := range removed {
		for d := path.Dir(p); d != "." && d != "/" && !keep[d]; d = path.Dir(d) {
			cand[d] = true
		}
	}
	ds := make([]string, 0, len(cand))
	for d := range cand {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return strings.Count(ds[i], "/") > strings.Count(ds[j], "/") })
	dirs := map[string]bool{}
	for _, d := range ds {
		if fi, err := r.lstat(d, dirs); err != nil || !fi.IsDir() {
			continue
		}
		_ = r.root.Remove(d) // fails, as wanted, on a directory that is not empty
	}
	return nil
}

// checkout writes paths back from the index at idx. A path in the way
// of it is never removed for it: a directory where the checkpoint has a
// file, or a leading component that is not a directory (both hold
// what the restore leaves alone), makes that path fail.
func (r *repo) checkout(ctx context.Context, idx []string, paths []string, res *Restored) {
	if len(paths) == 0 {
		return
	}
	var ok []string
	for _, p := range paths {
		if why := r.blocked(p); why != "" {
			res.Failed = append(res.Failed, PathError{Path: p, Message: why})
			continue
		}
		ok = append(ok, p)
	}
	if len(ok) == 0 {
		return
	}
	// --force overwrites the file at the path; --stdin with -z reads
	// the paths. Paths absent from the checkpoint's index are errors.
	if _, err := r.g.run(ctx, nulJoin(ok), idx, "checkout-index", "--force", "-z", "--stdin"); err == nil {
		res.Restored = append(res.Restored, ok...)
		return
	}
	// Find which paths failed, one at a time.
	for _, p := range ok {
		if _, err := r.g.run(ctx, nulJoin([]string{p}), idx, "checkout-index", "--force", "-z", "--stdin"); err != nil {
			res.Failed = append(res.Failed, PathError{Path: p, Message: err.Error()})
			continue
		}
		res.Restored = append(res.Restored, p)
	}
}

// blocked says why writing a file at p would remove something a restore
// leaves alone ("" if nothing is in the way): a directory at p, or a
// leading component that exists and is not a directory.
func (r *repo) blocked(p string) string {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		fi, err := r.root.Lstat(p[:i])
		if err != nil {
			return "" // missing: git creates it (and everything below)
		}
		if !fi.IsDir() {
			return fmt.Sprintf("%s is in the way (not a directory) and is left alone", p[:i])
		}
	}
	if fi, err := r.root.Lstat(p); err == nil && fi.IsDir() {
		return fmt.Sprintf("%s is a directory holding files the restore leaves alone", p)
	}
	return ""
}
