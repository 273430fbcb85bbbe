package tool

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// lcs is the length of the longest common subsequence of a and b.
func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func genLines(t *rapid.T, label string) []string {
	return rapid.SliceOfN(rapid.SampledFrom([]string{"a\n", "b\n", "c\n", "d\n", "\n", "e"}), 0, 30).Draw(t, label)
}

// TestDiffScriptIsShortestAndValid: the edit script turns a into b, its
// positions are consistent, and it keeps as many lines as the longest
// common subsequence (so it is a shortest script).
func TestDiffScriptIsShortestAndValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genLines(t, "a"), genLines(t, "b")
		script := diffLines(a, b)
		var got []string
		ai, bi, kept := 0, 0, 0
		for _, e := range script {
			if e.a != ai || e.b != bi {
				t.Fatalf("edit %c at (%d,%d), cursor (%d,%d)", e.op, e.a, e.b, ai, bi)
			}
			switch e.op {
			case ' ':
				if a[ai] != b[bi] {
					t.Fatalf("kept line differs: %q %q", a[ai], b[bi])
				}
				got = append(got, a[ai])
				ai, bi, kept = ai+1, bi+1, kept+1
			case '-':
				ai++
			case '+':
				got = append(got, b[bi])
				bi++
			}
		}
		if ai != len(a) || bi != len(b) || strings.Join(got, "") != strings.Join(b, "") {
			t.Fatalf("script does not produce b")
		}
		if want := lcs(a, b); kept != want {
			t.Fatalf("kept %d lines, the longest common subsequence has %d", kept, want)
		}
	})
}
