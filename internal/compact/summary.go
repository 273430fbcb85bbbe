package compact

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// Bounds of a transcript's entries, in bytes: a summary needs the gist
// of a tool call, not the whole of a file it read.
const (
	entryBytes      = 4000
	toolInputBytes  = 400
	toolResultBytes = 1500
	maxInstructions = 4000
)

// MaxInstructions bounds the instructions of a compaction by hand, in
// bytes.
const MaxInstructions = maxInstructions

// SummarySystem is the system prompt of a summary call.
const SummarySystem = "You summarise a coding agent's conversation with its user so that the agent can continue the work " +
	"with the summary in place of the conversation. Write plain text, no preamble."

// summaryInstructions follow the transcript in a summary request.
const summaryInstructions = `Summarise the conversation above for the agent that will continue it. It will see only your summary and the most recent messages, so keep everything it needs:

Goal: what the user wants, in their words where it matters.
Instructions: constraints, preferences and decisions the user stated.
Discoveries: what was learnt about the code, the environment and the problem.
Accomplished: what is done, and what was tried and failed (so it is not repeated).
Open work: what remains, and the next step.
Files: the files read, created or changed, with what matters about each.

Be concise and specific: names, paths, commands, error messages. Do not invent anything.`

// SummaryRequest is the request of a summary call on modelID: the
// transcript in one user message, then the instructions and the user's
// own (what to keep, from a compaction by hand). No tools are offered.
func SummaryRequest(modelID, transcript, userInstructions string, maxTokens int) model.Request {
	var b strings.Builder
	b.WriteString("<conversation>\n")
	b.WriteString(transcript)
	b.WriteString("\n</conversation>\n\n")
	b.WriteString(summaryInstructions)
	if u := strings.TrimSpace(userInstructions); u != "" {
		b.WriteString("\n\nThe user asks that the summary keep in particular: ")
		b.WriteString(clip(u, maxInstructions))
	}
	return model.Request{Model: modelID, System: SummarySystem, MaxTokens: maxTokens, Task: model.TaskSummary,
		Messages: []message.Message{{Role: message.RoleUser, Status: message.StatusComplete,
			Content: []message.Block{message.Text(b.String())}}}}
}

// SummaryOverhead is what a summary request adds to its transcript, in
// tokens (its system prompt and instructions, and the user's
// instructions at their longest).
var SummaryOverhead = model.EstimateTextTokens(SummarySystem+summaryInstructions) + maxInstructions/4 + 16

// Transcript renders messages (a plan's Fold) as the text a summarising
// model reads, within maxTokens: one entry per block, "[user] ...",
// "[assistant] ...", "[assistant called read_file] {...}", "[read_file
// result] ...", with long entries cut. When the whole does not fit, the
// oldest entries go first (an earlier summary always stays); dropped
// says how many went.
func Transcript(fold []message.Message, maxTokens int) (text string, dropped int) {
	var entries []string
	earlier := 0 // entries that always stay: an earlier summary
	names := map[string]string{}
	for i, m := range fold {
		switch m.Role {
		case message.RoleUser:
			t := m.PlainText()
			if i == 0 && strings.HasPrefix(t, "[metis compacted") {
				entries = append(entries, "[earlier summary] "+t)
				earlier = 1
				continue
			}
			if strings.TrimSpace(t) != "" {
				entries = append(entries, "[user] "+clip(t, entryBytes)+imageNote(m.Images()))
			}
		case message.RoleAssistant:
			for _, b := range m.Content {
				switch b.Type {
				case message.BlockText:
					if strings.TrimSpace(b.Text) != "" {
						entries = append(entries, "[assistant] "+clip(b.Text, entryBytes))
					}
				case message.BlockToolUse:
					names[b.ID] = b.Name
					entries = append(entries, "[assistant called "+b.Name+"] "+clip(string(b.Input), toolInputBytes))
				}
			}
		case message.RoleTool:
			for _, b := range m.Content {
				if b.Type != message.BlockToolResult {
					continue
				}
				name := names[b.ToolUseID]
				if name == "" {
					name = "tool"
				}
				what := " result] "
				if b.IsError {
					what = " error] "
				}
				entries = append(entries, "["+name+what+clip(b.Content, toolResultBytes)+imageNote(b.Images))
			}
		}
	}
	budget := maxTokens * 4 // bytes
	total := 0
	for _, e := range entries {
		total += len(e) + 1
	}
	for len(entries) > earlier && total > budget {
		i := earlier
		total -= len(entries[i]) + 1
		entries = append(entries[:i], entries[i+1:]...)
		dropped++
	}
	if dropped > 0 {
		note := "[the oldest " + strconv.Itoa(dropped) + " entries of the conversation did not fit and are left out]"
		entries = append(entries[:earlier], append([]string{note}, entries[earlier:]...)...)
	}
	return strings.Join(entries, "\n"), dropped
}

// clip cuts s at n bytes (on a rune boundary), saying so.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "… [" + strconv.Itoa(len(s)-n) + " more bytes]"
}

// imageNote tells the summariser, in a transcript, of the images a
// message held (it reads text only).
func imageNote(imgs []message.Block) string {
	switch len(imgs) {
	case 0:
		return ""
	case 1:
		return " [1 image]"
	}
	return fmt.Sprintf(" [%d images]", len(imgs))
}
