package agent

import (
	"slices"
	"strings"
	"testing"
)

// FuzzToolIDsUnique: whatever ids a model sends for the calls of one
// message (duplicates, empty ones, ids that look like renames), the
// dispatcher gets one distinct, non-empty id per call, and an id is kept
// as sent whenever no earlier call already holds it.
func FuzzToolIDsUnique(f *testing.F) {
	for _, seed := range []string{"call_1,call_1", ",,", "a,a,a_dup2", "a_dup2,a,a", "x", "toolu_01,toolu_02", ",a,"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, list string) {
		in := strings.Split(list, ",")
		if len(in) > 256 {
			in = in[:256]
		}
		seen := toolIDs{}
		out := make([]string, 0, len(in))
		for i, id := range in {
			got := seen.unique(id)
			if got == "" || slices.Contains(out, got) {
				t.Fatalf("call %d: id %q (from %q) empty or repeated in %q", i, got, id, out)
			}
			if id != "" && !slices.Contains(out, id) && got != id {
				t.Fatalf("call %d: free id %q renamed %q", i, id, got)
			}
			out = append(out, got)
		}
	})
}
