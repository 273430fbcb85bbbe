package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Ref is one checkpoint a git directory holds.
type Ref struct {
	ID      string
	Kind    Kind
	Created time.Time
}

// GCStats is what a collection did.
type GCStats struct {
	Workspaces  int   // git directories visited
	Removed     int   // checkpoints removed
	Kept        int   // checkpoints kept
	DirsRemoved int   // git directories removed whole (no checkpoint left)
	BytesBefore int64 // disk use of the git directories before
	BytesAfter  int64 // and after
}

// looseObjectsGC is the count of loose objects past which a collection
// packs a git directory even when no checkpoint was removed.
const looseObjectsGC = 2000

// GC visits every workspace's git directory: it removes the
// checkpoints keep refuses, packs the directory and drops the objects
// no checkpoint holds any more; a directory left with no checkpoint is
// removed whole. Each directory is locked while it is visited. keep
// sees the workspace's path and the checkpoint.
func (s *Store) GC(ctx context.Context, keep func(workspace string, ref Ref) bool) (GCStats, error) {
	var st GCStats
	ents, err := os.ReadDir(s.opts.Dir)
	if err != nil {
		return st, fmt.Errorf("checkpoint: gc: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || ctx.Err() != nil {
			continue
		}
		dir := filepath.Join(s.opts.Dir, e.Name())
		if err := s.gcDir(ctx, dir, keep, &st); err != nil {
			errs = append(errs, err)
		}
	}
	return st, errors.Join(errs...)
}

func (s *Store) gcDir(ctx context.Context, dir string, keep func(string, Ref) bool, st *GCStats) error {
	unlock, err := s.lock(ctx, dir)
	if err != nil {
		return err
	}
	defer unlock()
	st.Workspaces++
	before := diskUse(dir)
	st.BytesBefore += before
	name, err := os.ReadFile(filepath.Join(dir, workspaceFile))
	if err != nil {
		// Not a complete git directory of ours: a creation cut short.
		st.DirsRemoved++
		_ = os.Remove(dir + ".lock")
		return os.RemoveAll(dir)
	}
	ws := string(name)
	g := &git{bin: s.git, dir: dir, timeout: s.opts.Timeout}
	refs, err := listRefs(ctx, g)
	if err != nil {
		st.BytesAfter += before
		return err
	}
	var del strings.Builder
	removed := 0
	for _, r := range refs {
		if keep(ws, r) {
			st.Kept++
			continue
		}
		fmt.Fprintf(&del, "delete %s\n", refOf(r.ID))
		removed++
	}
	if removed == len(refs) {
		st.Removed += removed
		st.DirsRemoved++
		_ = os.Remove(dir + ".lock")
		return os.RemoveAll(dir)
	}
	if removed > 0 {
		if _, err := g.run(ctx, []byte(del.String()), nil, "update-ref", "--stdin"); err != nil {
			st.BytesAfter += before
			return fmt.Errorf("checkpoint: gc %s: %w", dir, err)
		}
		st.Removed += removed
	}
	if removed > 0 || looseObjects(ctx, g) > looseObjectsGC {
		// We hold the lock: no snapshot is writing objects that no ref
		// holds yet, so nothing unreferenced needs a grace period.
		if _, err := g.run(ctx, nil, nil, "gc", "--quiet", "--prune=now"); err != nil {
			st.BytesAfter += diskUse(dir)
			return fmt.Errorf("checkpoint: gc %s: %w", dir, err)
		}
	}
	st.BytesAfter += diskUse(dir)
	return nil
}

// listRefs lists the checkpoints of a git directory.
func listRefs(ctx context.Context, g *git) ([]Ref, error) {
	out, err := g.run(ctx, nil, nil, "for-each-ref", "--format=%(refname:lstrip=2)%09%(committerdate:unix)%09%(subject)", "refs/metis/")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list checkpoints of %s: %w", g.dir, err)
	}
	var refs []Ref
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 || !ValidID(parts[0]) {
			continue
		}
		secs, _ := strconv.ParseInt(parts[1], 10, 64)
		kind := Kind(strings.TrimSpace(strings.TrimPrefix(parts[2], commitSubject)))
		refs = append(refs, Ref{ID: parts[0], Kind: kind, Created: time.Unix(secs, 0)})
	}
	return refs, nil
}

// Refs lists the checkpoints held for workspace.
func (s *Store) Refs(ctx context.Context, workspace string) ([]Ref, error) {
	r, err := s.open(ctx, workspace)
	if err != nil {
		return nil, err
	}
	defer r.close()
	return listRefs(ctx, r.g)
}

// looseObjects counts a git directory's loose objects (0 if unknown).
func looseObjects(ctx context.Context, g *git) int {
	out, err := g.run(ctx, nil, nil, "count-objects")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.Fields(string(out) + " 0")[0])
	return n
}

// DiskUse is the bytes the git directory of workspace takes (0 if it
// does not exist).
func (s *Store) DiskUse(workspace string) int64 { return diskUse(s.Dir(workspace)) }

// diskUse sums the sizes of the files under dir.
func diskUse(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
