package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Change statuses (Change.Status).
const (
	Added       = "added"
	Modified    = "modified"
	Deleted     = "deleted"
	TypeChanged = "type_changed" // a file became a symlink or the reverse
)

// Change is one path that differs between two checkpoints.
type Change struct {
	Path   string
	Status string
	// OldMode and NewMode are git's modes ("100644", "100755" for an
	// executable, "120000" for a symlink; "" where the path is absent).
	OldMode, NewMode string
	// Additions and Deletions count lines; both are 0 for a binary file.
	Additions, Deletions int
	Binary               bool
}

// FileDiff is the unified diff of one changed path.
type FileDiff struct {
	Change
	Diff      string
	Truncated bool // the diff was cut
}

// Changes lists the paths that differ from checkpoint from to
// checkpoint to, in path order.
func (s *Store) Changes(ctx context.Context, workspace, from, to string) ([]Change, error) {
	r, err := s.open(ctx, workspace)
	if err != nil {
		return nil, err
	}
	defer r.close()
	a, b, err := r.resolvePair(ctx, from, to)
	if err != nil {
		return nil, err
	}
	return r.changes(ctx, a, b)
}

// Diffs is Changes with each path's unified diff: at most maxFile bytes
// of diff per path and maxTotal in all (the rest is cut, and marked).
func (s *Store) Diffs(ctx context.Context, workspace, from, to string, maxFile, maxTotal int) ([]FileDiff, error) {
	r, err := s.open(ctx, workspace)
	if err != nil {
		return nil, err
	}
	defer r.close()
	a, b, err := r.resolvePair(ctx, from, to)
	if err != nil {
		return nil, err
	}
	cs, err := r.changes(ctx, a, b)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	cw := &capped{w: &buf, n: maxTotal}
	if err := r.g.runTo(ctx, cw, nil, nil, "diff-tree", "-p", "-r", "--no-renames", "--no-color", "--no-ext-diff",
		"--no-textconv", a, b); err != nil {
		return nil, fmt.Errorf("checkpoint: diff: %w", err)
	}
	parts := splitPatch(buf.String())
	out := make([]FileDiff, len(cs))
	for i, c := range cs {
		out[i].Change = c
		if i < len(parts) {
			out[i].Diff = parts[i]
		}
		// The last part may be cut by maxTotal, the ones after it are
		// missing.
		if cw.truncated && i >= len(parts)-1 {
			out[i].Truncated = true
		}
		if len(out[i].Diff) > maxFile {
			d := out[i].Diff[:maxFile]
			if j := strings.LastIndexByte(d, '\n'); j > 0 {
				d = d[:j+1]
			}
			out[i].Diff, out[i].Truncated = d, true
		}
	}
	if len(parts) != len(cs) && !cw.truncated {
		// A path whose name breaks the split (a newline in it): give
		// the whole patch with the first path rather than misattribute.
		for i := range out {
			out[i].Diff, out[i].Truncated = "", false
		}
		if len(out) > 0 {
			out[0].Diff = buf.String()
		}
	}
	return out, nil
}

// resolvePair resolves two checkpoint ids.
func (r *repo) resolvePair(ctx context.Context, from, to string) (string, string, error) {
	a, err := r.resolve(ctx, from)
	if err != nil {
		return "", "", err
	}
	b, err := r.resolve(ctx, to)
	if err != nil {
		return "", "", err
	}
	return a, b, nil
}

// changes lists what differs between two commits.
func (r *repo) changes(ctx context.Context, a, b string) ([]Change, error) {
	out, err := r.g.run(ctx, nil, nil, "diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", a, b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: compare: %w", err)
	}
	return parseRawNumstat(out), nil
}

// parseRawNumstat reads `diff-tree -z --raw --numstat`: first every raw
// record (":old new sha sha S\0path\0"), then every numstat record
// ("add\tdel\tpath\0", "-\t-\tpath\0" for a binary file).
func parseRawNumstat(out []byte) []Change {
	fields := strings.Split(string(out), "\x00")
	var cs []Change
	byPath := map[string]int{}
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch {
		case strings.HasPrefix(f, ":"):
			if i+1 >= len(fields) {
				return cs
			}
			parts := strings.Fields(f[1:])
			i++
			if len(parts) < 5 {
				continue
			}
			c := Change{Path: fields[i], OldMode: parts[0], NewMode: parts[1], Status: statusOf(parts[4])}
			if c.OldMode == "000000" {
				c.OldMode = ""
			}
			if c.NewMode == "000000" {
				c.NewMode = ""
			}
			byPath[c.Path] = len(cs)
			cs = append(cs, c)
		case f != "":
			add, rest, ok1 := strings.Cut(f, "\t")
			del, path, ok2 := strings.Cut(rest, "\t")
			j, ok := byPath[path]
			if !ok1 || !ok2 || !ok {
				continue
			}
			if add == "-" {
				cs[j].Binary = true
				continue
			}
			cs[j].Additions, _ = strconv.Atoi(add)
			cs[j].Deletions, _ = strconv.Atoi(del)
		}
	}
	return cs
}

func statusOf(s string) string {
	switch s {
	case "A":
		return Added
	case "D":
		return Deleted
	case "T":
		return TypeChanged
	}
	return Modified
}

// splitPatch cuts a patch into its files' parts, at each "diff --git ".
func splitPatch(p string) []string {
	if p == "" {
		return nil
	}
	var parts []string
	start := 0
	for i := 0; i < len(p); {
		j := strings.Index(p[i:], "\ndiff --git ")
		if j < 0 {
			break
		}
		cut := i + j + 1
		parts = append(parts, p[start:cut])
		start, i = cut, cut
	}
	return append(parts, p[start:])
}
