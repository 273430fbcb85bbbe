package tool

import (
	"fmt"
	"strings"
)

// The apply_patch format (Codex's), as its parser reads it:
//
//	patch    := "*** Begin Patch" LF { fileop } "*** End Patch" [LF]
//	fileop   := add | delete | update
//	add      := "*** Add File: " path LF { "+" line LF }
//	delete   := "*** Delete File: " path LF
//	update   := "*** Update File: " path LF [ "*** Move to: " path LF ] chunk { chunk }
//	chunk    := ( "@@" | "@@ " context ) LF { (" " | "-" | "+") line LF } [ "*** End of File" LF ]
//
// Like Codex's, the parser is lenient where models are known to slip:
// spaces around the markers, CRLF line ends, a heredoc wrapper
// (<<'EOF' ... EOF) around the patch, no "@@" before the first chunk of
// a file, and an empty line in a chunk read as an empty context line.

const (
	patchBegin   = "*** Begin Patch"
	patchEnd     = "*** End Patch"
	patchAdd     = "*** Add File:"
	patchDelete  = "*** Delete File:"
	patchUpdate  = "*** Update File:"
	patchMove    = "*** Move to:"
	patchEOF     = "*** End of File"
	patchContext = "@@"
)

// patchOp is one file operation of a patch.
type patchOp struct {
	kind    byte   // 'A'dd, 'D'elete or 'U'pdate
	path    string // as written
	moveTo  string // Update only; "" when the file stays
	content string // Add only
	chunks  []patchChunk
	line    int // 1-based line of its header in the patch
}

// patchChunk is one "@@" section of an Update.
type patchChunk struct {
	context    string // the text after "@@ ", a line to find first
	hasContext bool
	lines      []chunkLine
	eof        bool // "*** End of File": old must end the file
	line       int  // 1-based line of the chunk's first line in the patch
}

// chunkLine is one line of a chunk: ' ' (context), '-' or '+'.
type chunkLine struct {
	op   byte
	text string
}

// old returns the lines the chunk expects in the file: its context and
// removed lines.
func (c patchChunk) old() []string {
	out := make([]string, 0, len(c.lines))
	for _, l := range c.lines {
		if l.op != '+' {
			out = append(out, l.text)
		}
	}
	return out
}

// patchError is a patch that does not parse.
func patchError(line int, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	return Errorf(ClassInvalidInput, "the patch does not parse: %s. A patch is \"*** Begin Patch\", then for each file \"*** Add File: path\" (lines starting with +), \"*** Delete File: path\" or \"*** Update File: path\" (optionally \"*** Move to: path\") followed by @@ chunks of lines starting with ' ', '-' or '+', then \"*** End Patch\"", msg)
}

// parsePatch parses a patch in the apply_patch format.
func parsePatch(text string) ([]patchOp, error) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	first := 1 // line number of lines[0]
	if len(lines) >= 4 && isHeredocStart(lines[0]) && strings.HasSuffix(strings.TrimSpace(lines[len(lines)-1]), "EOF") {
		lines, first = lines[1:len(lines)-1], 2
	}
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != patchBegin {
		return nil, patchError(first, "the first line must be %q", patchBegin)
	}
	if len(lines) < 2 || strings.TrimSpace(lines[len(lines)-1]) != patchEnd {
		return nil, patchError(first+len(lines)-1, "the last line must be %q", patchEnd)
	}
	body := lines[1 : len(lines)-1]
	var ops []patchOp
	for i := 0; i < len(body); {
		ln := first + 1 + i
		head := strings.TrimSpace(body[i])
		switch {
		case head == "":
			i++ // blank lines between file sections
		case strings.HasPrefix(head, patchAdd):
			op := patchOp{kind: 'A', path: strings.TrimSpace(head[len(patchAdd):]), line: ln}
			i++
			var sb strings.Builder
			for ; i < len(body) && strings.HasPrefix(body[i], "+"); i++ {
				sb.WriteString(body[i][1:])
				sb.WriteByte('\n')
			}
			op.content = sb.String()
			ops = append(ops, op)
		case strings.HasPrefix(head, patchDelete):
			ops = append(ops, patchOp{kind: 'D', path: strings.TrimSpace(head[len(patchDelete):]), line: ln})
			i++
		case strings.HasPrefix(head, patchUpdate):
			op := patchOp{kind: 'U', path: strings.TrimSpace(head[len(patchUpdate):]), line: ln}
			i++
			if i < len(body) && strings.HasPrefix(strings.TrimSpace(body[i]), patchMove) {
				op.moveTo = strings.TrimSpace(strings.TrimSpace(body[i])[len(patchMove):])
				if op.moveTo == "" {
					return nil, patchError(first+1+i, "%q needs a path", patchMove)
				}
				i++
			}
			for i < len(body) {
				if strings.TrimSpace(body[i]) == "" {
					i++ // blank lines between chunks
					continue
				}
				if strings.HasPrefix(body[i], "*") {
					break // the next file section (or a stray marker)
				}
				c, n, err := parseChunk(body[i:], first+1+i, len(op.chunks) == 0)
				if err != nil {
					return nil, err
				}
				op.chunks = append(op.chunks, c)
				i += n
			}
			if op.path != "" && len(op.chunks) == 0 {
				return nil, patchError(ln, "the Update File section for %q has no @@ chunk", op.path)
			}
			ops = append(ops, op)
		default:
			return nil, patchError(ln, "%q is not a file section header; expected %q, %q or %q", truncateLine(head, 80),
				patchAdd, patchDelete, patchUpdate)
		}
		if len(ops) > 0 && ops[len(ops)-1].path == "" {
			return nil, patchError(ops[len(ops)-1].line, "a file section without a path")
		}
	}
	return ops, nil
}

// isHeredocStart recognises the first line of a heredoc wrapper.
func isHeredocStart(l string) bool {
	l = strings.TrimSpace(l)
	return l == "<<EOF" || l == "<<'EOF'" || l == `<<"EOF"`
}

// parseChunk parses one chunk at the start of lines (ln is the patch
// line of lines[0]); it returns the chunk and the lines it used.
func parseChunk(lines []string, ln int, first bool) (patchChunk, int, error) {
	c := patchChunk{line: ln}
	i := 0
	head := strings.TrimRight(lines[0], " \t")
	switch {
	case head == patchContext:
		i = 1
	case strings.HasPrefix(head, patchContext+" "):
		c.context, c.hasContext = strings.TrimSpace(head[len(patchContext)+1:]), true
		i = 1
	case !first:
		return c, 0, patchError(ln, "expected a chunk to start with \"@@\", got %q", truncateLine(lines[0], 80))
	}
	body := 0
	for ; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == patchEOF {
			if body == 0 {
				break
			}
			c.eof = true
			i++
			break
		}
		if l == "" {
			c.lines = append(c.lines, chunkLine{' ', ""})
			body++
			continue
		}
		switch l[0] {
		case ' ', '-', '+':
			c.lines = append(c.lines, chunkLine{l[0], l[1:]})
		default:
			if body == 0 {
				return c, 0, patchError(ln+i, "unexpected line %q in a chunk: every line of a chunk starts with ' ' (context), '-' (removed) or '+' (added)", truncateLine(l, 80))
			}
			return c, i, nil
		}
		body++
	}
	if body == 0 {
		return c, 0, patchError(ln, "a chunk with no lines")
	}
	return c, i, nil
}
