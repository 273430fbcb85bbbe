package tool

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"
)

// lineMatcher finds the lines of a buffer that a regular expression
// matches, much faster than running the expression line by line (Go's
// regexp has no DFA): it first finds the places where a sequence of
// bytes every match must contain occurs, and checks only their lines
// with the expression. The sequence, taken from the expression's
// syntax, is the best of:
//
//   - a literal ("Lstat", "Error(" in `\w+Error\(`), found with
//     bytes.Index, which is vectorised; a pattern that is only a
//     literal needs no check at all;
//   - a case-insensitive ASCII literal, found the same way in an
//     ASCII-lower-cased copy of the buffer;
//   - a run of byte sets (`[0-9]{12,}` needs twelve digits in a row,
//     `[A-Z]{4}_` four capitals and an underscore), found by a table
//     scan anchored on its rarest set.
//
// With none, the expression runs over the whole buffer in multi-line
// mode and each hit's line is checked.
type lineMatcher struct {
	re    *regexp.Regexp // checks one line (no line end in it)
	multi *regexp.Regexp // the same in multi-line mode, over a whole buffer
	lit   []byte         // a literal every match holds; lower case if fold
	fold  bool           // lit is found in the ASCII-lower-cased buffer
	exact bool           // the expression is lit itself: no check needed
	sets  []byteSet      // else a run of byte sets every match holds
	// tables holds the sets as lookup tables, and shift the Horspool
	// shift of the run: how far the window may move when its last byte
	// is c.
	tables [][256]bool
	shift  *[256]int
}

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) size() int {
	return bits.OnesCount64(s[0]) + bits.OnesCount64(s[1]) + bits.OnesCount64(s[2]) + bits.OnesCount64(s[3])
}
func (s *byteSet) single() (byte, bool) { return s.first(), s.size() == 1 }

func (s *byteSet) first() byte {
	for i, w := range s {
		if w != 0 {
			return byte(i*64 + bits.TrailingZeros64(w))
		}
	}
	return 0
}

// foldPair reports whether the set is {x, X} for an ASCII letter.
func (s *byteSet) foldPair() (byte, bool) {
	if s.size() != 2 {
		return 0, false
	}
	lo := s.first() | 0x20
	return lo, lo >= 'a' && lo <= 'z' && s.has(lo) && s.has(lo-32)
}

// maxSeq bounds a byte-set sequence.
const maxSeq = 64

// seqInfo describes the byte sequences a syntax node's matches hold.
type seqInfo struct {
	fixed  bool        // every match is exactly full
	full   []byteSet   // when fixed
	prefix []byteSet   // every match starts with it
	suffix []byteSet   // every match ends with it
	cands  [][]byteSet // sequences every match contains
}

func fixedSeq(s []byteSet) seqInfo {
	return seqInfo{fixed: true, full: s, prefix: s, suffix: s, cands: [][]byteSet{s}}
}

// sequences analyses a syntax tree (as parsed: Simplify would turn
// x{4,} into xxxx+, losing that its last four x are contiguous).
func sequences(re *syntax.Regexp) seqInfo {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return fixedSeq(nil)
	case syntax.OpLiteral:
		var out []byteSet
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				lo := r | 0x20
				switch {
				case lo == 'k' || lo == 's':
					// Also folds to U+212A, U+017F: bytes of another length.
					return concatInfo([]seqInfo{{fixed: true, full: out, prefix: out, suffix: out, cands: [][]byteSet{out}}, {}})
				case lo >= 'a' && lo <= 'z':
					var s byteSet
					s.add(byte(lo))
					s.add(byte(lo - 32))
					out = append(out, s)
					continue
				case r >= utf8.RuneSelf:
					return concatInfo([]seqInfo{{fixed: true, full: out, prefix: out, suffix: out, cands: [][]byteSet{out}}, {}})
				}
			}
			var buf [utf8.UTFMax]byte
			n := utf8.EncodeRune(buf[:], r)
			for _, b := range buf[:n] {
				var s byteSet
				s.add(b)
				out = append(out, s)
			}
		}
		return fixedSeq(out)
	case syntax.OpCharClass:
		var s byteSet
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi >= utf8.RuneSelf {
				return seqInfo{} // a character of more than one byte
			}
			for r := lo; r <= hi; r++ {
				s.add(byte(r))
			}
		}
		return fixedSeq([]byteSet{s})
	case syntax.OpCapture:
		return sequences(re.Sub[0])
	case syntax.OpPlus:
		return repeatInfo(sequences(re.Sub[0]), 1, -1)
	case syntax.OpRepeat:
		if re.Min < 1 {
			return seqInfo{}
		}
		return repeatInfo(sequences(re.Sub[0]), re.Min, re.Max)
	case syntax.OpConcat:
		parts := make([]seqInfo, len(re.Sub))
		for i, s := range re.Sub {
			parts[i] = sequences(s)
		}
		return concatInfo(parts)
	}
	return seqInfo{}
}

// repeatInfo describes sub{min,max} (max -1: no bound), min >= 1: a
// fixed sub repeated gives its min copies at both ends.
func repeatInfo(sub seqInfo, min, max int) seqInfo {
	if !sub.fixed {
		return seqInfo{prefix: sub.prefix, suffix: sub.suffix, cands: sub.cands}
	}
	var seq []byteSet
	for i := 0; i < min && len(seq) < maxSeq; i++ {
		seq = append(seq, sub.full...)
	}
	seq = seq[:len(seq):len(seq)]
	if min == max && len(seq) == min*len(sub.full) {
		return fixedSeq(seq)
	}
	return seqInfo{prefix: seq, suffix: seq, cands: [][]byteSet{seq}}
}

// concatInfo combines the infos of consecutive parts.
func concatInfo(parts []seqInfo) seqInfo {
	out := seqInfo{fixed: true}
	var run []byteSet
	prefixOpen := true
	addCand := func(c []byteSet) {
		if len(c) > 0 {
			out.cands = append(out.cands, c[:min(len(c), maxSeq)])
		}
	}
	for _, p := range parts {
		out.cands = append(out.cands, p.cands...)
		if p.fixed {
			run = append(run, p.full...)
			if len(run) > 2*maxSeq {
				addCand(run)
				run = append([]byteSet(nil), run[len(run)-maxSeq:]...)
				out.fixed, prefixOpen = false, false // too long to keep whole
			}
			continue
		}
		c := append(append([]byteSet(nil), run...), p.prefix...)
		addCand(c)
		if prefixOpen {
			out.prefix = c[:min(len(c), maxSeq)]
			prefixOpen = false
		}
		out.fixed = false
		run = append([]byteSet(nil), p.suffix...)
	}
	addCand(run)
	if out.fixed {
		out.full = run
		out.prefix = run
	} else if prefixOpen {
		out.prefix = run[:min(len(run), maxSeq)]
	}
	out.suffix = run[max(0, len(run)-maxSeq):]
	return out
}

// bitsOf scores how rare a run of sets is: the information, in bits,
// of seeing it at a given place.
func bitsOf(seq []byteSet) float64 {
	b := 0.0
	for i := range seq {
		b += math.Log2(256 / float64(max(1, seq[i].size())))
	}
	return b
}

// newLineMatcher compiles pattern (RE2 syntax), case-insensitively if
// fold.
func newLineMatcher(pattern string, fold bool) (*lineMatcher, error) {
	if fold {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	multi, err := regexp.Compile("(?m)" + pattern)
	if err != nil {
		return nil, err
	}
	m := &lineMatcher{re: re, multi: multi}
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	info := sequences(tree)
	// The longest literal, and the longest case-folded literal, within
	// the candidate runs; and the rarest run.
	var lit, foldLit []byte
	var best []byteSet
	for _, c := range info.cands {
		for i := 0; i < len(c); {
			j := i
			var l []byte
			for ; j < len(c); j++ {
				b, ok := c[j].single()
				if !ok || b == '\n' {
					break
				}
				l = append(l, b)
			}
			if len(l) > len(lit) {
				lit = l
			}
			i = j + 1
		}
		for i := 0; i < len(c); {
			j := i
			var l []byte
			letters := 0
			for ; j < len(c); j++ {
				if b, ok := c[j].single(); ok && b != '\n' {
					if b >= 'A' && b <= 'Z' {
						break // never in the lower-cased buffer
					}
					l = append(l, b)
					continue
				}
				if b, ok := c[j].foldPair(); ok {
					l = append(l, b)
					letters++
					continue
				}
				break
			}
			if letters > 0 && len(l) > len(foldLit) {
				foldLit = l
			}
			i = j + 1
		}
		if bitsOf(c) > bitsOf(best) {
			best = c
		}
	}
	switch {
	case len(lit) >= 3 || len(lit) > 0 && bitsOf(best) < 24:
		m.lit = lit
		t := tree
		for t.Op == syntax.OpCapture {
			t = t.Sub[0]
		}
		m.exact = info.fixed && t.Op == syntax.OpLiteral && t.Flags&syntax.FoldCase == 0 && bytes.Equal([]byte(string(t.Rune)), lit)
	case len(foldLit) >= 3:
		m.lit, m.fold = foldLit, true
	case bitsOf(best) >= 16:
		m.sets, m.shift = best, horspool(best)
		m.tables = make([][256]bool, len(best))
		for j := range best {
			for c := range 256 {
				m.tables[j][c] = best[j].has(byte(c))
			}
		}
	}
	return m, nil
}

// scratch is a searcher's reusable memory.
type scratch struct{ lower []byte }

// each calls fn with the start and end (before the "\n") of every line
// of buf that the expression matches, in order, until fn returns false.
func (m *lineMatcher) each(buf []byte, sc *scratch, fn func(start, end int) bool) {
	switch {
	case m.lit != nil:
		hay := buf
		if m.fold {
			sc.lower = asciiLower(buf, sc.lower)
			hay = sc.lower
		}
		for pos := 0; pos < len(buf); {
			i := bytes.Index(hay[pos:], m.lit)
			if i < 0 {
				return
			}
			if !m.check(buf, pos+i, &pos, fn) {
				return
			}
		}
	case m.sets != nil:
		m.scanSets(buf, fn)
	default:
		m.scan(buf, fn)
	}
}

// check checks the line holding buf[at] and sets *pos past it; false
// once fn asked to stop.
func (m *lineMatcher) check(buf []byte, at int, pos *int, fn func(start, end int) bool) bool {
	start := bytes.LastIndexByte(buf[:at], '\n') + 1
	end := lineEnd(buf, at)
	*pos = end + 1
	return !(m.exact || m.re.Match(buf[start:end])) || fn(start, end)
}

// horspool computes the shifts of Horspool's search for a run of byte
// sets: for each byte, the distance from the run's end to the last
// earlier position whose set holds it (the run's length if none).
func horspool(sets []byteSet) *[256]int {
	var shift [256]int
	n := len(sets)
	for c := range shift {
		shift[c] = n
	}
	for j := 0; j < n-1; j++ {
		for c := range 256 {
			if sets[j].has(byte(c)) {
				shift[c] = n - 1 - j
			}
		}
	}
	return &shift
}

// scanSets finds the places of the run of sets with Horspool's search
// (mostly n bytes at a time: code rarely holds, say, a digit where a
// run of twelve digits would end) and checks their lines.
func (m *lineMatcher) scanSets(buf []byte, fn func(start, end int) bool) {
	tables, shift := m.tables, m.shift
	n := len(tables)
	last := &tables[n-1]
	for i := 0; i+n <= len(buf); {
		c := buf[i+n-1]
		if last[c] {
			ok := true
			for k := n - 2; k >= 0; k-- {
				if !tables[k][buf[i+k]] {
					ok = false
					break
				}
			}
			if ok {
				var pos int
				if !m.check(buf, i, &pos, fn) {
					return
				}
				i = max(pos, i+1)
				continue
			}
		}
		i += shift[c]
	}
}

// scan runs the expression over the whole buffer.
func (m *lineMatcher) scan(buf []byte, fn func(start, end int) bool) {
	for pos := 0; pos < len(buf); {
		loc := m.multi.FindIndex(buf[pos:])
		if loc == nil {
			return
		}
		at := pos + loc[0]
		if at == len(buf) && buf[len(buf)-1] == '\n' {
			return // the empty "line" after the last line end
		}
		if !m.check(buf, at, &pos, fn) {
			return
		}
	}
}

// matchLine reports whether one line matches.
func (m *lineMatcher) matchLine(l []byte) bool {
	if m.exact {
		return bytes.Contains(l, m.lit)
	}
	return m.re.Match(l)
}

func lineEnd(buf []byte, at int) int {
	if j := bytes.IndexByte(buf[at:], '\n'); j >= 0 {
		return at + j
	}
	return len(buf)
}

// asciiLower lower-cases the ASCII letters of b into dst (reused),
// eight bytes at a time.
func asciiLower(b, dst []byte) []byte {
	if cap(dst) < len(b) {
		dst = make([]byte, len(b), len(b)+len(b)/4)
	}
	dst = dst[:len(b)]
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		low7 := w &^ high
		// Bit 7 of each byte: its low seven bits are >= 'A', and > 'Z'.
		geA := low7 + (0x80-'A')*ones
		gtZ := low7 + (0x80-'Z'-1)*ones
		upper := geA &^ gtZ &^ w & high // and the byte is ASCII
		binary.LittleEndian.PutUint64(dst[i:], w|upper>>2)
	}
	for ; i < len(b); i++ {
		c := b[i]
		if c-'A' < 26 {
			c += 'a' - 'A'
		}
		dst[i] = c
	}
	return dst
}
