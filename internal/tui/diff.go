package tui

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Lines of a diff shown on a tool card: collapsed, and expanded (tab).
const (
	diffLinesCollapsed = 12
	diffLinesExpanded  = 400
)

// renderDiff colours a unified diff for a card: added lines green,
// removed red, hunk heads cyan, file heads bold; at most limit lines,
// then a line saying how many more there are. Each line is cut to
// width.
func (m *Model) renderDiff(diff string, limit, width int) string {
	st := m.st
	lines := strings.Split(strings.TrimRight(diff, "\n"), "\n")
	var out []string
	for i, l := range lines {
		if i == limit {
			more := fmt.Sprintf("… %d more lines", len(lines)-limit)
			if !m.expanded {
				more += " (tab shows more)"
			}
			out = append(out, st.faint.Render(more))
			break
		}
		l = ansi.Truncate(printable(l), width, "…")
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "diff "):
			out = append(out, st.diffFile.Render(l))
		case strings.HasPrefix(l, "@@"):
			out = append(out, st.diffHunk.Render(l))
		case strings.HasPrefix(l, "+"):
			out = append(out, st.diffAdd.Render(l))
		case strings.HasPrefix(l, "-"):
			out = append(out, st.diffDel.Render(l))
		default:
			out = append(out, st.faint.Render(l))
		}
	}
	return strings.Join(out, "\n")
}

// proposedChange is the change a file tool's input would make, as a
// diff-like preview for an approval prompt ("" for other tools):
// edit_file's old and new text, write_file's content, apply_patch's
// patch.
func proposedChange(tool string, input json.RawMessage) string {
	var in struct {
		Path      string `json:"path"`
		OldString string `json:"old_string"`
		NewString string `json:"new_string"`
		Content   string `json:"content"`
		Patch     string `json:"patch"`
		Input     string `json:"input"`
	}
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	prefixed := func(sign, s string) []string {
		if s == "" {
			return nil
		}
		ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
		for i, l := range ls {
			ls[i] = sign + l
		}
		return ls
	}
	switch tool {
	case "edit_file":
		out := []string{"--- a/" + in.Path, "+++ b/" + in.Path, "@@"}
		out = append(out, prefixed("-", in.OldString)...)
		return strings.Join(append(out, prefixed("+", in.NewString)...), "\n")
	case "write_file":
		out := []string{"+++ b/" + in.Path}
		return strings.Join(append(out, prefixed("+", in.Content)...), "\n")
	case "apply_patch":
		if in.Patch != "" {
			return in.Patch
		}
		return in.Input
	}
	return ""
}
