package acp

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"

	sdk "github.com/coder/acp-go-sdk"
)

// The tools that change files (write_file, edit_file, apply_patch)
// report the change in tool.completed: paths, a unified diff as git
// writes it, and diff_truncated when it was cut at 64 KiB. ACP's diff
// content is a path with an old and a new text, so each hunk becomes
// one diff content (its context and removed lines, its context and
// added lines) and one location (the file, at the hunk's first new
// line). A new file has no old text; a binary change, or a diff cut
// short, adds a line of text saying so.

// hunk is one hunk of a unified diff.
type hunk struct {
	path             string // the new path (the old one for a deletion)
	oldStart         int
	newStart         int
	oldText, newText string
	created          bool // the old side is /dev/null
}

// diffFile is what the diff says of one file.
type diffFile struct {
	path          string
	hunks         []hunk
	binary        bool
	created, gone bool
}

// maxDiffFiles and maxDiffHunks bound what one diff becomes: past them
// the rest is left to the tool's text.
const (
	maxDiffFiles = 50
	maxDiffHunks = 200
)

// parseUnifiedDiff reads a git-style unified diff. It never fails:
// lines it does not understand are skipped, a hunk cut short ends where
// the text ends, and a path is never taken from anything but a ---/+++
// or "diff --git" line.
func parseUnifiedDiff(diff string) []diffFile {
	var (
		files          []diffFile
		cur            *diffFile
		h              *hunk
		oldB, newB     strings.Builder
		oldLeft, nLeft int
		hunks          int
	)
	flush := func() {
		if h != nil && cur != nil {
			h.oldText, h.newText = oldB.String(), newB.String()
			cur.hunks = append(cur.hunks, *h)
			hunks++
		}
		h = nil
		oldB.Reset()
		newB.Reset()
	}
	newFile := func() {
		flush()
		if len(files) < maxDiffFiles {
			files = append(files, diffFile{})
			cur = &files[len(files)-1]
		} else {
			cur = nil
		}
	}
	for line := range strings.Lines(diff) {
		line = strings.TrimSuffix(line, "\n")
		if h != nil && (oldLeft > 0 || nLeft > 0) {
			switch {
			case strings.HasPrefix(line, " ") || line == "":
				rest := strings.TrimPrefix(line, " ")
				oldB.WriteString(rest + "\n")
				newB.WriteString(rest + "\n")
				oldLeft--
				nLeft--
				continue
			case strings.HasPrefix(line, "-"):
				oldB.WriteString(line[1:] + "\n")
				oldLeft--
				continue
			case strings.HasPrefix(line, "+"):
				newB.WriteString(line[1:] + "\n")
				nLeft--
				continue
			case strings.HasPrefix(line, `\`):
				continue // "\ No newline at end of file"
			}
		}
		switch {
		case strings.HasPrefix(line, "diff --git "):
			newFile()
			if cur != nil {
				if _, b, ok := strings.Cut(line, " b/"); ok {
					cur.path = b
				}
			}
		case strings.HasPrefix(line, "--- "):
			if cur == nil || len(cur.hunks) > 0 || h != nil {
				newFile()
			}
			if cur != nil {
				p := diffPath(line[4:])
				cur.created = p == ""
				if p != "" && cur.path == "" {
					cur.path = p
				}
			}
		case strings.HasPrefix(line, "+++ "):
			if cur != nil {
				p := diffPath(line[4:])
				cur.gone = p == ""
				if p != "" {
					cur.path = p
				}
			}
		case strings.HasPrefix(line, "@@ "):
			flush()
			if cur == nil || hunks >= maxDiffHunks {
				continue
			}
			os, ol, ns, nl, ok := hunkHeader(line)
			if !ok {
				continue
			}
			h = &hunk{path: cur.path, oldStart: os, newStart: ns, created: cur.created}
			oldLeft, nLeft = ol, nl
		case strings.HasPrefix(line, "Binary files "):
			if cur != nil {
				cur.binary = true
			}
		case h != nil && strings.HasPrefix(line, `\`):
		default:
			flush()
		}
	}
	flush()
	return files
}

// diffPath is the path of a ---/+++ line: "" for /dev/null, without the
// a/ or b/ prefix and a trailing tab and timestamp.
func diffPath(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return ""
	}
	if unq, err := strconv.Unquote(s); err == nil && strings.HasPrefix(s, `"`) {
		s = unq
	}
	for _, p := range []string{"a/", "b/"} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest
		}
	}
	return s
}

// hunkHeader reads "@@ -a,b +c,d @@ …" (a count of 1 may be left out).
func hunkHeader(line string) (os, ol, ns, nl int, ok bool) {
	f := strings.Fields(line)
	if len(f) < 3 || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return 0, 0, 0, 0, false
	}
	os, ol, ok1 := rangeOf(f[1][1:])
	ns, nl, ok2 := rangeOf(f[2][1:])
	return os, ol, ns, nl, ok1 && ok2
}

func rangeOf(s string) (start, n int, ok bool) {
	a, b, has := strings.Cut(s, ",")
	start, err := strconv.Atoi(a)
	if err != nil || start < 0 {
		return 0, 0, false
	}
	n = 1
	if has {
		if n, err = strconv.Atoi(b); err != nil || n < 0 {
			return 0, 0, false
		}
	}
	return start, n, true
}

// absPath makes a workspace-relative path absolute (as ACP wants).
func absPath(workspace, p string) string {
	if p == "" || filepath.IsAbs(p) || workspace == "" {
		return p
	}
	return filepath.Join(workspace, filepath.FromSlash(p))
}

// diffContent is a tool.completed diff as ACP tool-call content and
// locations.
func diffContent(diff string, truncated bool, workspace string) ([]sdk.ToolCallContent, []sdk.ToolCallLocation) {
	var (
		content []sdk.ToolCallContent
		locs    []sdk.ToolCallLocation
	)
	for _, f := range parseUnifiedDiff(diff) {
		path := absPath(workspace, f.path)
		if path == "" {
			continue
		}
		if f.binary {
			content = append(content, sdk.ToolContent(sdk.TextBlock("Binary file "+f.path+" changed")))
			locs = append(locs, sdk.ToolCallLocation{Path: path})
			continue
		}
		if len(f.hunks) == 0 {
			locs = append(locs, sdk.ToolCallLocation{Path: path})
			continue
		}
		for _, h := range f.hunks {
			if h.created {
				content = append(content, sdk.ToolDiffContent(path, h.newText))
			} else {
				content = append(content, sdk.ToolDiffContent(path, h.newText, h.oldText))
			}
			line := max(h.newStart, 1)
			if f.gone {
				line = max(h.oldStart, 1)
			}
			locs = append(locs, sdk.ToolCallLocation{Path: path, Line: sdk.Ptr(line)})
		}
	}
	if truncated {
		content = append(content, sdk.ToolContent(sdk.TextBlock("[the diff was cut short: the tool's result has the whole change]")))
	}
	return content, locs
}

// proposedContent previews the change a file tool would make, for a
// permission request: edit_file's replacement as a diff, write_file's
// content as the file's new text, apply_patch's patch as text.
func proposedContent(name string, raw json.RawMessage, workspace string) []sdk.ToolCallContent {
	var in struct {
		Path      string `json:"path"`
		Content   string `json:"content"`
		OldString string `json:"old_string"`
		NewString string `json:"new_string"`
		Patch     string `json:"patch"`
		Command   string `json:"command"`
	}
	if json.Unmarshal(raw, &in) != nil {
		return nil
	}
	switch {
	case name == "edit_file" && in.Path != "":
		return []sdk.ToolCallContent{sdk.ToolDiffContent(absPath(workspace, in.Path), in.NewString, in.OldString)}
	case name == "write_file" && in.Path != "":
		return []sdk.ToolCallContent{sdk.ToolDiffContent(absPath(workspace, in.Path), in.Content)}
	case name == "apply_patch" && in.Patch != "":
		return []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock("```\n" + in.Patch + "\n```"))}
	case name == "shell" && in.Command != "":
		return []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock("```sh\n" + in.Command + "\n```"))}
	}
	return nil
}
