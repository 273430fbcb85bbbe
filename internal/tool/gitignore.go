package tool

import (
	"bytes"
	"strings"
)

// .gitignore matching, as git does it (gitignore(5)), for the searches
// of glob and grep:
//
//   - blank lines and lines starting with "#" are skipped; "\#" and "\!"
//     start a pattern with that character; trailing spaces are dropped
//     unless escaped with "\";
//   - "!" negates: a path a previous pattern ignored is included again
//     (but nothing inside an ignored directory can be, since the search
//     never enters it);
//   - a trailing "/" matches directories only;
//   - a pattern with a "/" at its start or in its middle is anchored at
//     the directory of its .gitignore; otherwise it matches a name at
//     any depth below it;
//   - "*" matches anything but "/", "?" one character but "/", "[...]"
//     a set ("!" or "^" negates, ranges, [:alpha:] classes); "**" as a
//     whole path part matches any number of directories; like git's,
//     matching is by bytes ("?" matches one byte of "é");
//   - rules of a deeper .gitignore, and later rules in a file, win.
//
// No library is used: the one Go module served for this is unmaintained
// and mishandles several of these cases, and the walk wants matching
// cheap (no regular expressions, no allocation per path).

// ignoreRule is one pattern of a .gitignore.
type ignoreRule struct {
	pattern  string
	base     string // directory of the .gitignore, workspace-relative; "" at the root
	negate   bool
	dirOnly  bool
	anchored bool // matched against the path below base, not the name
}

// ignoreSet is the rules in force in a directory: its ancestors' and
// its own, in order.
type ignoreSet struct{ rules []ignoreRule }

// parseIgnore reads a .gitignore in the directory base.
func parseIgnore(data []byte, base string) []ignoreRule {
	var out []ignoreRule
	for _, raw := range bytes.Split(data, []byte("\n")) {
		line := strings.TrimSuffix(string(raw), "\r")
		line = trimUnescapedSpaces(line)
		if line == "" || line[0] == '#' {
			continue
		}
		r := ignoreRule{base: base}
		if line[0] == '!' {
			r.negate, line = true, line[1:]
		} else if strings.HasPrefix(line, `\!`) || strings.HasPrefix(line, `\#`) {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		if line == "" {
			continue
		}
		if strings.Contains(line, "/") {
			r.anchored = true
			line = strings.TrimPrefix(line, "/")
		}
		r.pattern = line
		out = append(out, r)
	}
	return out
}

// trimUnescapedSpaces drops trailing spaces not escaped by "\".
func trimUnescapedSpaces(s string) string {
	for strings.HasSuffix(s, " ") {
		t := strings.TrimSuffix(s, " ")
		// Count the backslashes before the space.
		n := 0
		for i := len(t) - 1; i >= 0 && t[i] == '\\'; i-- {
			n++
		}
		if n%2 == 1 {
			return s // an escaped space ends the pattern
		}
		s = t
	}
	return s
}

// with returns the set with rules added after its own.
func (s *ignoreSet) with(rules []ignoreRule) *ignoreSet {
	if len(rules) == 0 {
		return s
	}
	var own []ignoreRule
	if s != nil {
		own = s.rules[:len(s.rules):len(s.rules)]
	}
	return &ignoreSet{rules: append(own, rules...)}
}

// ignored reports whether the workspace-relative path rel (a directory
// if dir) is ignored by the set: the last rule matching it decides.
func (s *ignoreSet) ignored(rel string, dir bool) bool {
	if s == nil {
		return false
	}
	name := rel[strings.LastIndexByte(rel, '/')+1:]
	for i := len(s.rules) - 1; i >= 0; i-- {
		r := &s.rules[i]
		if r.dirOnly && !dir {
			continue
		}
		sub := rel
		if r.base != "" {
			if !strings.HasPrefix(rel, r.base+"/") {
				continue
			}
			sub = rel[len(r.base)+1:]
		}
		target := name
		if r.anchored {
			target = sub
		}
		if wildmatch(r.pattern, target) {
			return !r.negate
		}
	}
	return false
}

// Results of a wildmatch step: besides a match and a mismatch, two ways
// to give up early that keep the matching of "*" polynomial.
const (
	wmMatch = iota
	wmNoMatch
	wmAbortAll        // no later start of a "*" can match either
	wmAbortToStarStar // only a "**" further left can still help
)

// wildmatch matches text against a gitignore pattern, where "*", "?"
// and "[...]" never match "/" and "**" as a path part does.
func wildmatch(pattern, text string) bool {
	return wm(pattern, 0, text, 0) == wmMatch
}

func wm(p string, pi int, t string, ti int) int {
	for ; pi < len(p); pi++ {
		c := p[pi]
		if ti >= len(t) && c != '*' {
			return wmAbortAll
		}
		switch c {
		case '\\':
			pi++
			if pi >= len(p) || t[ti] != p[pi] {
				return wmNoMatch
			}
			ti++
		case '?':
			if t[ti] == '/' {
				return wmNoMatch
			}
			ti++
		case '[':
			if t[ti] == '/' {
				return wmNoMatch
			}
			ok, end := matchClass(p, pi, t[ti])
			if end < 0 {
				return wmAbortAll // an unclosed "[" matches nothing
			}
			if !ok {
				return wmNoMatch
			}
			pi = end
			ti++
		case '*':
			start := pi
			for pi+1 < len(p) && p[pi+1] == '*' {
				pi++
			}
			slash := false // this star may match across "/"
			if pi > start {
				if (start == 0 || p[start-1] == '/') && (pi+1 == len(p) || p[pi+1] == '/') {
					// "**/" matching no directory at all.
					if pi+1 < len(p) && wm(p, pi+2, t, ti) == wmMatch {
						return wmMatch
					}
					slash = true
				}
			}
			pi++ // the pattern after the stars
			if pi == len(p) {
				if !slash && strings.IndexByte(t[ti:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			}
			if !slash && p[pi] == '/' {
				// One star and a slash: the star takes the rest of this
				// path part.
				k := strings.IndexByte(t[ti:], '/')
				if k < 0 {
					return wmNoMatch
				}
				ti += k
				pi-- // the loop's pi++ lands on the slash, matched below
				continue
			}
			for ; ti <= len(t); ti++ {
				if ti < len(t) && isLiteral(p[pi]) {
					// Skip ahead to the literal that must come next.
					for ti < len(t) && t[ti] != p[pi] && (slash || t[ti] != '/') {
						ti++
					}
					if ti == len(t) || t[ti] != p[pi] {
						if slash {
							return wmAbortAll // nowhere further in the text
						}
						// Not in this path part: a "**" further left may
						// still match more of the path and try again.
						return wmAbortToStarStar
					}
				}
				m := wm(p, pi, t, ti)
				if m != wmNoMatch {
					if !slash || m != wmAbortToStarStar {
						return m
					}
				} else if !slash && ti < len(t) && t[ti] == '/' {
					return wmAbortToStarStar
				}
				if ti == len(t) {
					break
				}
			}
			return wmAbortAll
		default:
			if t[ti] != c {
				return wmNoMatch
			}
			ti++
		}
	}
	if ti < len(t) {
		return wmNoMatch
	}
	return wmMatch
}

func isLiteral(c byte) bool { return c != '*' && c != '?' && c != '[' && c != '\\' }

// matchClass matches the byte r against the bracket expression at p[pi] ("[")
// and returns the index of its "]" (-1 if unclosed).
func matchClass(p string, pi int, r byte) (bool, int) {
	i := pi + 1
	negate := false
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		negate, i = true, i+1
	}
	matched := false
	first := true
	for i < len(p) {
		if p[i] == ']' && !first {
			return matched != negate, i
		}
		first = false
		if p[i] == '[' && i+1 < len(p) && p[i+1] == ':' {
			if end := strings.Index(p[i+2:], ":]"); end >= 0 {
				if classMatches(p[i+2:i+2+end], r) {
					matched = true
				}
				i += 2 + end + 2
				continue
			}
		}
		lo, n := classChar(p, i)
		if n == 0 {
			return false, -1
		}
		i += n
		hi := lo
		if i+1 < len(p) && p[i] == '-' && p[i+1] != ']' {
			h, m := classChar(p, i+1)
			if m == 0 {
				return false, -1
			}
			hi, i = h, i+1+m
		}
		if lo <= r && r <= hi {
			matched = true
		}
	}
	return false, -1
}

// classChar reads one (possibly escaped) byte of a bracket expression;
// n is 0 at the end of the pattern.
func classChar(p string, i int) (byte, int) {
	if p[i] == '\\' {
		if i+1 >= len(p) {
			return 0, 0
		}
		return p[i+1], 2
	}
	return p[i], 1
}

func classMatches(class string, r byte) bool {
	switch class {
	case "alnum":
		return r < 128 && (isAlpha(r) || isDigit(r))
	case "alpha":
		return isAlpha(r)
	case "digit":
		return isDigit(r)
	case "lower":
		return r >= 'a' && r <= 'z'
	case "upper":
		return r >= 'A' && r <= 'Z'
	case "space":
		return r == ' ' || r >= '\t' && r <= '\r'
	case "blank":
		return r == ' ' || r == '\t'
	case "punct":
		return r > ' ' && r < 127 && !isAlpha(r) && !isDigit(r)
	case "xdigit":
		return isDigit(r) || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F'
	case "print":
		return r >= ' ' && r < 127
	case "graph":
		return r > ' ' && r < 127
	case "cntrl":
		return r < ' ' || r == 127
	}
	return false
}

func isAlpha(r byte) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }
func isDigit(r byte) bool { return r >= '0' && r <= '9' }
