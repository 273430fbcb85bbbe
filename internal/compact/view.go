package compact

import (
	"fmt"

	"github.com/metis-agent/metis/internal/message"
)

// StubMinBytes is the size from which an old tool result is stubbed: a
// shorter one costs no more than its stub.
const StubMinBytes = 256

// Latest returns the newest complete compaction block of a stored
// conversation and the index of its message, or nil and -1.
func Latest(stored []message.Message) (*message.Compaction, int) {
	for i := len(stored) - 1; i >= 0; i-- {
		if c := compactionOf(stored[i]); c != nil {
			return c, i
		}
	}
	return nil, -1
}

// compactionOf returns the compaction block of m, or nil if m is not a
// compaction message.
func compactionOf(m message.Message) *message.Compaction {
	if m.Status != message.StatusComplete {
		return nil
	}
	for _, b := range m.Content {
		if b.Type == message.BlockCompaction && b.Compaction != nil {
			return b.Compaction
		}
	}
	return nil
}

// IsCompaction reports whether m is a compaction message.
func IsCompaction(m message.Message) bool {
	for _, b := range m.Content {
		if b.Type == message.BlockCompaction {
			return true
		}
	}
	return false
}

// View returns the model's view of a stored conversation: with no
// compaction, every message but compaction messages; after one, the
// newest compaction's summary (a user message, when there is one)
// followed by the messages stored after its compacted_through, in
// stored order, with the tool results of those up to its
// stubbed_through shown as one-line stubs. Only the newest compaction
// counts: each one's summary covers the ones before. Messages are
// shared with stored except those changed (stubs, the summary).
func View(stored []message.Message) []message.Message {
	c, ci := Latest(stored)
	out := make([]message.Message, 0, len(stored))
	if c == nil {
		for _, m := range stored {
			if !IsCompaction(m) {
				out = append(out, m)
			}
		}
		return out
	}
	from, stubTo := 0, -1
	if c.CompactedThrough != "" {
		if i := indexOf(stored, c.CompactedThrough); i >= 0 {
			from = i + 1
		}
	}
	if c.StubbedThrough != "" {
		stubTo = indexOf(stored, c.StubbedThrough)
	}
	if c.Summary != "" {
		out = append(out, SummaryMessage(stored[ci], c))
	}
	for i := from; i < len(stored); i++ {
		m := stored[i]
		if IsCompaction(m) {
			continue
		}
		if i <= stubTo && m.Role == message.RoleTool {
			m = stubbed(m, toolNames(stored, i))
		}
		out = append(out, m)
	}
	return out
}

func indexOf(ms []message.Message, id string) int {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].ID == id {
			return i
		}
	}
	return -1
}

// SummaryMessage renders a compaction's summary as the user message the
// model reads in place of what it replaced. It keeps the compaction
// message's id.
func SummaryMessage(cm message.Message, c *message.Compaction) message.Message {
	return message.Message{ID: cm.ID, SessionID: cm.SessionID, TurnID: cm.TurnID, Role: message.RoleUser,
		Status: message.StatusComplete, CreatedAt: cm.CreatedAt,
		Content: []message.Block{message.Text(SummaryText(c.Summary))}}
}

// SummaryText is the text of a summary message.
func SummaryText(summary string) string {
	return "[metis compacted this conversation to fit the model's context window. The earlier part is summarised below; " +
		"the messages after this one are verbatim.]\n\n<summary>\n" + summary + "\n</summary>"
}

// toolNames maps the tool_use ids of the assistant message before
// stored[i] (the one whose calls a tool message answers) to their names.
func toolNames(stored []message.Message, i int) map[string]string {
	names := map[string]string{}
	for j := i - 1; j >= 0; j-- {
		if stored[j].Role == message.RoleAssistant {
			for _, b := range stored[j].Content {
				if b.Type == message.BlockToolUse {
					names[b.ID] = b.Name
				}
			}
			break
		}
		if !IsCompaction(stored[j]) {
			break
		}
	}
	return names
}

// stubbed returns m with its long tool results, and those holding
// images, replaced by stubs.
func stubbed(m message.Message, names map[string]string) message.Message {
	changed := false
	content := make([]message.Block, len(m.Content))
	for i, b := range m.Content {
		if stubbable(b) {
			b.Content, b.Images = Stub(names[b.ToolUseID], len(b.Content)+imageBytes(b.Images)), nil
			changed = true
		}
		content[i] = b
	}
	if !changed {
		return m
	}
	m.Content = content
	return m
}

// Stub is the one line an old tool result of size bytes is replaced by.
func Stub(tool string, size int) string {
	if tool == "" {
		tool = "tool"
	}
	return fmt.Sprintf("[metis removed this %s result (%d bytes) from the context to save space; call the tool again if you need it]", tool, size)
}

// stubbable reports whether a block is a tool result worth stubbing:
// a long one, or one holding images (each counts for up to about 1,600
// tokens however short its text).
func stubbable(b message.Block) bool {
	return b.Type == message.BlockToolResult && (len(b.Content) >= StubMinBytes || len(b.Images) > 0)
}

func imageBytes(imgs []message.Block) int {
	n := 0
	for _, im := range imgs {
		n += int(im.Size)
	}
	return n
}
