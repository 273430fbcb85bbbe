package agent

import "github.com/metis-agent/metis/internal/tool"

// fileChange is the part of tool.completed that says what a tool that
// changes files changed: the paths and their unified diff (absent for
// other tools). docs/event-catalog.md describes it.
type fileChange struct {
	Paths         []string `json:"paths,omitempty"`
	Diff          string   `json:"diff,omitempty"`
	DiffTruncated bool     `json:"diff_truncated,omitempty"`
}

func changeOf(c *tool.Change) fileChange {
	if c == nil {
		return fileChange{}
	}
	return fileChange{Paths: c.Paths, Diff: c.Diff, DiffTruncated: c.DiffTruncated}
}
