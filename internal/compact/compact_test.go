package compact

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// conv builds a stored conversation of turns: each turn a user message,
// then rounds of an assistant message with tool calls and the tool
// message answering them, then an assistant answer.
type conv struct {
	ms []message.Message
	n  int
}

func (c *conv) add(role message.Role, blocks ...message.Block) message.Message {
	c.n++
	m := message.Message{ID: fmt.Sprintf("msg_%04d", c.n), SessionID: "sess_t", Role: role, Status: message.StatusComplete, Content: blocks}
	c.ms = append(c.ms, m)
	return m
}

func (c *conv) turn(rounds, resultBytes int) {
	c.add(message.RoleUser, message.Text(fmt.Sprintf("request %d", c.n)))
	for r := range rounds {
		id := fmt.Sprintf("tu_%d_%d", c.n, r)
		c.add(message.RoleAssistant, message.Text("looking"), message.Block{Type: message.BlockToolUse, ID: id, Name: "read_file", Input: json.RawMessage(`{"path":"a"}`)})
		c.add(message.RoleTool, message.Block{Type: message.BlockToolResult, ToolUseID: id, Content: strings.Repeat("x", resultBytes)})
	}
	c.add(message.RoleAssistant, message.Text("done"))
}

// store appends a compaction message holding b.
func (c *conv) store(b message.Compaction) {
	c.add(message.RoleUser, message.Block{Type: message.BlockCompaction, Compaction: &b})
}

// pairsIntact reports the first tool message of view not preceded by an
// assistant message calling every tool it answers.
func pairsIntact(view []message.Message) error {
	for i, m := range view {
		if m.Role != message.RoleTool {
			continue
		}
		if i == 0 || view[i-1].Role != message.RoleAssistant {
			return fmt.Errorf("tool message %s at %d follows no assistant message", m.ID, i)
		}
		called := map[string]bool{}
		for _, b := range view[i-1].Content {
			if b.Type == message.BlockToolUse {
				called[b.ID] = true
			}
		}
		for _, b := range m.Content {
			if b.Type == message.BlockToolResult && !called[b.ToolUseID] {
				return fmt.Errorf("tool result %s of %s answers no tool_use of %s", b.ToolUseID, m.ID, view[i-1].ID)
			}
		}
	}
	return nil
}

func TestViewWithoutCompactionIsTheConversation(t *testing.T) {
	var c conv
	c.turn(2, 10)
	c.turn(1, 10)
	v := View(c.ms)
	if len(v) != len(c.ms) {
		t.Fatalf("view has %d messages, want %d", len(v), len(c.ms))
	}
	for i := range v {
		if v[i].ID != c.ms[i].ID {
			t.Fatalf("view[%d] = %s, want %s", i, v[i].ID, c.ms[i].ID)
		}
	}
}

// TestViewAfterCompaction: the summary comes first as a user message
// (with the compaction message's id), then the messages after
// compacted_through in stored order (those stored before the compaction
// message too), long tool results up to stubbed_through as stubs naming
// their tool, and compaction messages never.
func TestViewAfterCompaction(t *testing.T) {
	var c conv
	c.turn(1, 10)           // msg_0001..0004
	c.turn(2, 1000)         // msg_0005..0010
	c.turn(1, StubMinBytes) // msg_0011..0014
	c.store(message.Compaction{Summary: "they read files", CompactedThrough: "msg_0004", StubbedThrough: "msg_0013", Method: "summary"})
	c.turn(1, 1000) // msg_0016..
	v := View(c.ms)
	if v[0].ID != "msg_0015" || v[0].Role != message.RoleUser || !strings.Contains(v[0].PlainText(), "they read files") {
		t.Fatalf("view starts with %+v", v[0])
	}
	if v[1].ID != "msg_0005" || len(v) != 1+(14-4)+4 {
		t.Fatalf("view is %d messages from %s", len(v), v[1].ID)
	}
	for _, m := range v {
		for _, b := range m.Content {
			switch {
			case b.Type == message.BlockCompaction:
				t.Fatalf("compaction block in the view: %s", m.ID)
			case b.Type == message.BlockToolResult && m.ID <= "msg_0013":
				if b.Content != Stub("read_file", len(c.ms[indexOf(c.ms, m.ID)].Content[0].Content)) {
					t.Errorf("%s: result %q, want a stub", m.ID, b.Content)
				}
			case b.Type == message.BlockToolResult && len(b.Content) != 1000:
				t.Errorf("%s: a result after stubbed_through was changed: %q", m.ID, b.Content)
			}
		}
	}
	if err := pairsIntact(v); err != nil {
		t.Fatal(err)
	}
	// The stored messages are untouched.
	if len(c.ms[6].Content[0].Content) != 1000 {
		t.Fatal("View changed a stored message")
	}
}

// TestEstimateUsesTheProvidersCount: after a call, the estimate is the
// provider's count of that call plus the bytes added since; a call from
// before the newest compaction does not count.
func TestEstimateUsesTheProvidersCount(t *testing.T) {
	var c conv
	c.turn(1, 100)
	c.ms[len(c.ms)-1].Usage = &message.Usage{InputTokens: 300, CacheReadTokens: 700, OutputTokens: 20}
	c.add(message.RoleUser, message.Text(strings.Repeat("y", 400)))
	v := View(c.ms)
	want := 300 + 700 + 20 + model.EstimateMessageTokens(v[len(v)-1].Content)
	if got := Estimate(c.ms, v, 5); got != want {
		t.Fatalf("Estimate = %d, want %d", got, want)
	}
	c.store(message.Compaction{CompactedThrough: "msg_0001", Method: "summary", Summary: "s"})
	v = View(c.ms)
	if got, want := Estimate(c.ms, v, 5), Tokens(v, 5); got != want {
		t.Fatalf("after a compaction Estimate = %d, want the bytes' %d", got, want)
	}
}

// genConv draws a conversation of 1 to 12 turns, each with 0 to 3 tool
// rounds, and maybe a compaction in the middle.
func genConv(t *rapid.T) *conv {
	c := &conv{}
	turns := rapid.IntRange(1, 12).Draw(t, "turns")
	mid := rapid.IntRange(-1, turns-1).Draw(t, "compacted_at")
	for i := range turns {
		c.turn(rapid.IntRange(0, 3).Draw(t, "rounds"), rapid.IntRange(0, 3000).Draw(t, "bytes"))
		if i == mid {
			v := View(c.ms)
			p, err := NewPlan(c.ms, v, Limits{Window: rapid.IntRange(200, 4000).Draw(t, "w0")}, "auto", Tokens(v, 0))
			if err == nil {
				b := p.Block
				if b.Method == methodSummary {
					if b, err = p.Finish("summary so far"); err != nil {
						continue
					}
				}
				c.store(b)
			}
		}
	}
	return c
}

// TestPlanKeepsToolPairsAndMakesProgress: whatever the conversation and
// window, a plan cuts at a message that is not a tool message, the view
// after it starts with a user message and keeps every tool_result with
// its tool_use, and it makes the view smaller (or fails with
// ErrNoProgress).
func TestPlanKeepsToolPairsAndMakesProgress(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genConv(t)
		v := View(c.ms)
		before := Tokens(v, 50)
		lim := Limits{Window: rapid.IntRange(100, 8000).Draw(t, "window"), Reserve: rapid.IntRange(0, 500).Draw(t, "reserve"), Fixed: 50}
		trigger := rapid.SampledFrom([]string{"auto", "overflow", "manual"}).Draw(t, "trigger")
		p, err := NewPlan(c.ms, v, lim, trigger, before)
		if errors.Is(err, ErrNoProgress) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		b := p.Block
		if b.Method == methodSummary {
			if b, err = p.Finish("a short summary"); errors.Is(err, ErrNoProgress) {
				return
			}
		}
		if trigger == "manual" && b.Method != methodSummary {
			t.Fatalf("a compaction by hand used %s", b.Method)
		}
		if b.TokensAfter >= b.TokensBefore {
			t.Fatalf("no progress: %d -> %d", b.TokensBefore, b.TokensAfter)
		}
		newest := ""
		for _, m := range c.ms {
			if !IsCompaction(m) {
				newest = m.ID
			}
		}
		c.store(b)
		after := View(c.ms)
		if got := Tokens(after, 50); int64(got) != b.TokensAfter {
			t.Fatalf("tokens_after %d, the view is %d", b.TokensAfter, got)
		}
		if after[0].Role != message.RoleUser {
			t.Fatalf("the view starts with a %s message", after[0].Role)
		}
		if err := pairsIntact(after); err != nil {
			t.Fatal(err)
		}
		// The newest message is always kept verbatim.
		if after[len(after)-1].ID != newest {
			t.Fatalf("the view ends with %s, want the newest message %s", after[len(after)-1].ID, newest)
		}
	})
}

// TestDropSaysSo: a failed summary leaves a note, after the earlier
// summary, and method drop.
func TestDropSaysSo(t *testing.T) {
	var c conv
	for range 6 {
		c.turn(1, 2000)
	}
	c.store(message.Compaction{Summary: "earlier", CompactedThrough: "msg_0004", Method: "summary"})
	for range 6 {
		c.turn(1, 2000)
	}
	v := View(c.ms)
	p, err := NewPlan(c.ms, v, Limits{Window: 3000}, "manual", Tokens(v, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Drop("dropped for a test")
	if err != nil || b.Method != methodDrop || !strings.HasPrefix(b.Summary, "earlier\n\n[dropped for a test]") {
		t.Fatalf("Drop = %+v, %v", b, err)
	}
}

// TestTranscriptKeepsTheEarlierSummary: when the transcript must be cut,
// the oldest entries go, the earlier summary stays, and it says so.
func TestTranscriptKeepsTheEarlierSummary(t *testing.T) {
	var c conv
	for range 10 {
		c.turn(1, 1000)
	}
	fold := append([]message.Message{SummaryMessage(message.Message{ID: "msg_s"}, &message.Compaction{Summary: "EARLIER"})}, c.ms...)
	text, dropped := Transcript(fold, 600)
	if dropped == 0 || !strings.HasPrefix(text, "[earlier summary]") || !strings.Contains(text, "EARLIER") ||
		!strings.Contains(text, "did not fit") || len(text) > 600*4+200 {
		t.Fatalf("dropped %d, %d bytes:\n%.400s", dropped, len(text), text)
	}
	if !strings.Contains(text, "[read_file result]") || !strings.Contains(text, "[assistant called read_file]") {
		t.Fatalf("entries not named:\n%s", text)
	}
}
