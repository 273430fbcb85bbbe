package tool

import (
	"bytes"
	"fmt"
	"strings"
)

// MaxDiffBytes bounds the unified diff a call reports (Change.Diff); a
// longer one is cut at a line boundary and ends with a note.
const MaxDiffBytes = 64 << 10

// diffContext is the number of unchanged lines shown around each change.
const diffContext = 3

// maxDiffCost bounds the work of one file's diff, in steps of the Myers
// search ((lines of both sides) × edit distance); past it the differing
// middle of the two files is shown as removed and added whole, which is
// a correct diff, only not the shortest one.
const maxDiffCost = 50_000_000

// maxDiffEdits bounds the edit distance the search explores (its memory
// grows with the square of it).
const maxDiffEdits = 2000

// Change is what a call did, or would do, to the workspace's files: the
// paths it adds, updates, deletes or moves (workspace-relative,
// slash-separated, in the order of the call) and one unified diff of
// them all, at most MaxDiffBytes.
type Change struct {
	Paths         []string
	Diff          string
	DiffTruncated bool
}

// fileDiff is one file's part of a Change. Old is nil for a file that
// did not exist, New nil for one that is deleted.
type fileDiff struct {
	Path, NewPath string // NewPath differs from Path for a move
	Old, New      []byte
}

// newChange builds the Change of the given file diffs.
func newChange(files ...fileDiff) *Change {
	c := &Change{}
	var b strings.Builder
	for _, f := range files {
		c.Paths = append(c.Paths, f.Path)
		if f.NewPath != "" && f.NewPath != f.Path {
			c.Paths = append(c.Paths, f.NewPath)
		}
		writeFileDiff(&b, f)
	}
	c.Diff, c.DiffTruncated = capDiff(b.String())
	return c
}

// capDiff cuts d to MaxDiffBytes at a line boundary, with a note.
func capDiff(d string) (string, bool) {
	if len(d) <= MaxDiffBytes {
		return d, false
	}
	cut := strings.LastIndexByte(d[:MaxDiffBytes], '\n') + 1
	return d[:cut] + fmt.Sprintf("[diff truncated: showing %d of %d bytes]\n", cut, len(d)), true
}

// writeFileDiff writes f as a git-style unified diff: "--- a/path",
// "+++ b/path" (/dev/null for a side that does not exist), then hunks.
func writeFileDiff(b *strings.Builder, f fileDiff) {
	newPath := f.NewPath
	if newPath == "" {
		newPath = f.Path
	}
	oldName, newName := "a/"+f.Path, "b/"+newPath
	if f.Old == nil {
		oldName = "/dev/null"
	}
	if f.New == nil {
		newName = "/dev/null"
	}
	if isBinary(f.Old) || isBinary(f.New) {
		if !bytes.Equal(f.Old, f.New) || newPath != f.Path {
			fmt.Fprintf(b, "Binary files %s and %s differ\n", oldName, newName)
		}
		return
	}
	hunks := unifiedHunks(f.Old, f.New, diffContext)
	if len(hunks) == 0 && newPath == f.Path && (f.Old == nil) == (f.New == nil) {
		return
	}
	fmt.Fprintf(b, "--- %s\n+++ %s\n", oldName, newName)
	b.WriteString(hunks)
}

// UnifiedDiff returns the unified diff of old and new (hunks only, no
// file header) with context unchanged lines around each change; "" when
// they are equal.
func UnifiedDiff(old, new []byte, context int) string { return unifiedHunks(old, new, context) }

// isBinary reports whether b looks binary: a NUL byte in its first 8 KiB
// (git's test).
func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}

// splitLines splits b into lines, each with its terminator ("\n"); the
// last may have none.
func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	out := make([]string, 0, strings.Count(s, "\n")+1)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// edit is one line of an edit script. a and b are the positions in the
// old and the new lines: the line's index on the side(s) it belongs to,
// and on the other side the index of the next line there (so a hunk
// that has no line on one side still knows where it sits).
type edit struct {
	op   byte // ' ', '-' or '+'
	a, b int
}

// diffLines returns an edit script turning a into b.
func diffLines(a, b []string) []edit {
	// Common prefix and suffix first: edits are usually local.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	script := make([]edit, 0, len(a)+len(b)-pre-suf)
	for i := range pre {
		script = append(script, edit{' ', i, i})
	}
	script = append(script, myers(a[pre:len(a)-suf], b[pre:len(b)-suf], pre, pre)...)
	for i := range suf {
		script = append(script, edit{' ', len(a) - suf + i, len(b) - suf + i})
	}
	return script
}

// myers returns a shortest edit script from a to b (Myers' greedy
// algorithm, every move kept inside the edit graph), with positions
// offset by ao and bo. Past the bounds above it returns the whole
// replacement instead.
func myers(a, b []string, ao, bo int) []edit {
	n, m := len(a), len(b)
	whole := func() []edit {
		out := make([]edit, 0, n+m)
		for i := range n {
			out = append(out, edit{'-', ao + i, bo})
		}
		for j := range m {
			out = append(out, edit{'+', ao + n, bo + j})
		}
		return out
	}
	if n == 0 || m == 0 {
		return whole()
	}
	// Lines as small integers, so comparisons are cheap.
	ids := make(map[string]int32, n+m)
	intern := func(ls []string) []int32 {
		out := make([]int32, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	x, y := intern(a), intern(b)
	maxD := min(n+m, maxDiffEdits, max(64, maxDiffCost/(n+m)))
	// v[k] is the furthest x reached on diagonal k = x - y, -1 where no
	// path within the graph reaches it; trace[d] keeps v[-d..d].
	off := maxD + 1
	v := make([]int32, 2*maxD+3)
	for i := range v {
		v[i] = -1
	}
	var trace [][]int32
	found := -1
	for d := 0; d <= maxD && found < 0; d++ {
		for k := -d; k <= d; k += 2 {
			i := -1
			if d == 0 {
				i = 0
			} else {
				i, _ = step(func(k int) int { return int(v[off+k]) }, k, d, n, m)
			}
			if i >= 0 {
				j := i - k
				for i < n && j < m && x[i] == y[j] {
					i, j = i+1, j+1
				}
				if i == n && j == m {
					found = d
				}
			}
			v[off+k] = int32(i)
		}
		snap := make([]int32, 2*d+1)
		copy(snap, v[off-d:off+d+1])
		trace = append(trace, snap)
	}
	if found < 0 {
		return whole()
	}
	// Walk back from (n, m).
	rev := make([]edit, 0, n+m)
	i, j := n, m
	for d := found; d > 0; d-- {
		prev := trace[d-1] // v[-(d-1)..d-1]
		k := i - j
		_, down := step(func(k int) int { return int(prev[k+d-1]) }, k, d, n, m)
		var mi int // where the move lands, before the snake
		if down {
			mi = int(prev[k+1+d-1])
		} else {
			mi = int(prev[k-1+d-1]) + 1
		}
		for i > mi {
			i, j = i-1, j-1
			rev = append(rev, edit{' ', ao + i, bo + j})
		}
		if down {
			j--
			rev = append(rev, edit{'+', ao + i, bo + j})
		} else {
			i--
			rev = append(rev, edit{'-', ao + i, bo + j})
		}
	}
	for i > 0 {
		i, j = i-1, j-1
		rev = append(rev, edit{' ', ao + i, bo + j})
	}
	for l, r := 0, len(rev)-1; l < r; l, r = l+1, r-1 {
		rev[l], rev[r] = rev[r], rev[l]
	}
	return rev
}

// step picks the move onto diagonal k at step d (d > 0) from the
// previous step's furthest points (prev(k) for k in -(d-1)..d-1, -1 for
// none): down from diagonal k+1 (an insertion) or right from k-1 (a
// deletion), the one reaching further, among those that stay inside the
// n×m graph. It returns the x reached (-1 if neither move is possible)
// and whether the move is down.
func step(prev func(int) int, k, d, n, m int) (int, bool) {
	down, right := -1, -1
	if k+1 <= d-1 {
		if px := prev(k + 1); px >= 0 && px-k <= m {
			down = px
		}
	}
	if k-1 >= -(d - 1) {
		if px := prev(k - 1); px >= 0 && px+1 <= n {
			right = px + 1
		}
	}
	if down >= right && down >= 0 {
		return down, true
	}
	return right, false
}

// unifiedHunks formats the diff of old and new as unified-diff hunks.
func unifiedHunks(old, new []byte, context int) string {
	a, b := splitLines(old), splitLines(new)
	script := diffLines(a, b)
	var out strings.Builder
	for s := 0; s < len(script); {
		// Find the next change.
		for s < len(script) && script[s].op == ' ' {
			s++
		}
		if s == len(script) {
			break
		}
		start := max(0, s-context)
		// Extend the hunk while the next change is within 2*context
		// unchanged lines.
		end := s
		for end < len(script) {
			if script[end].op != ' ' {
				end++
				continue
			}
			run := end
			for run < len(script) && script[run].op == ' ' {
				run++
			}
			if run == len(script) || run-end > 2*context {
				end = min(end+context, len(script))
				break
			}
			end = run
		}
		writeHunk(&out, script[start:end], a, b)
		s = end
	}
	return out.String()
}

// writeHunk writes one hunk of the script.
func writeHunk(out *strings.Builder, h []edit, a, b []string) {
	aLen, bLen := 0, 0
	for _, e := range h {
		if e.op != '+' {
			aLen++
		}
		if e.op != '-' {
			bLen++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(h[0].a, aLen), hunkRange(h[0].b, bLen))
	for _, e := range h {
		var line string
		if e.op == '+' {
			line = b[e.b]
		} else {
			line = a[e.a]
		}
		out.WriteByte(e.op)
		out.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats "start,len" of a hunk header from the 0-based index
// of its first line; a side with no lines names the line before it.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
