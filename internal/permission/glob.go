package permission

import (
	"path"
	"strings"
)

// The policy matches with three kinds of pattern:
//
//   - plain globs, where '*' stands for any run of characters (tool
//     names, URLs, hosts, shell command lines);
//   - path globs, matched segment by segment with path.Match ('*', '?'
//     and classes within one segment), where a segment "**" stands for
//     any number of segments;
//   - shell command patterns, which are plain globs over the command's
//     words (see shellSubject).
//
// A subject may hold holes: parts of a shell word the policy cannot
// know before the shell runs (a $VAR, a $(...)), written as the byte
// hole. A pattern never holds one (rules with control characters are
// refused), so a hole is matched only by '*'.

// hole stands for a part of a shell word that is not known until the
// shell expands it.
const hole = '\x00'

// sep separates the words of a shell command in a subject, and the
// words of a shell pattern: a space inside a quoted word is a literal
// character, which only '*' matches.
const sep = '\x01'

// globMatch reports whether subject matches pattern, in which '*' stands
// for any run of bytes (a hole included) and every other byte for
// itself.
func globMatch(pattern, subject string) bool {
	p, s := 0, 0
	star, mark := -1, 0
	for s < len(subject) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, s
			p++
		case p < len(pattern) && pattern[p] == subject[s]:
			p++
			s++
		case star >= 0:
			p = star + 1
			mark++
			s = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// globMayMatch reports whether some expansion of subject's holes (each
// any run of bytes) matches pattern: whether the two globs intersect.
// It is what a deny rule needs of a command it cannot fully know.
func globMayMatch(pattern, subject string) bool {
	// memo[i][j]: pattern[i:] and subject[j:] can still match.
	n, m := len(pattern), len(subject)
	if n*m > 1<<20 {
		return true // too long to decide cheaply: assume it may
	}
	memo := make([]int8, (n+1)*(m+1)) // 0 unknown, 1 yes, 2 no
	var at func(i, j int) bool
	at = func(i, j int) bool {
		k := i*(m+1) + j
		if memo[k] != 0 {
			return memo[k] == 1
		}
		var ok bool
		switch {
		case i == n && j == m:
			ok = true
		case i < n && pattern[i] == '*':
			ok = at(i+1, j) || (j < m && at(i, j+1))
		case j < m && subject[j] == hole:
			ok = at(i, j+1) || (i < n && at(i+1, j))
		case i < n && j < m:
			ok = pattern[i] == subject[j] && at(i+1, j+1)
		}
		memo[k] = 2
		if ok {
			memo[k] = 1
		}
		return ok
	}
	return at(0, 0)
}

// pathMatch reports whether the slash-separated relative path p matches
// the path glob pattern (see above).
func pathMatch(pattern, p string) bool {
	return segsMatch(strings.Split(pattern, "/"), strings.Split(p, "/"))
}

func segsMatch(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			if len(pat) == 1 {
				return true
			}
			for i := 0; i <= len(segs); i++ {
				if segsMatch(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], segs[0]); err != nil || !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}
