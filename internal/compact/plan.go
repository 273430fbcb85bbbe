package compact

import (
	"errors"

	"github.com/metis-agent/metis/internal/message"
)

// Limits are what deciding and planning a compaction needs to know of
// the next call, in tokens.
type Limits struct {
	// Window is the model's context window (0: unknown; a session whose
	// window is unknown is compacted only by hand or on an overflow).
	Window int
	// Reserve is what the answer needs: the call's max_tokens. At most a
	// quarter of the window is reserved.
	Reserve int
	// Fixed is the system prompt and the tool definitions.
	Fixed int
}

// Available is the most a request may send: the window less the reserve
// and a twentieth for the error of the estimate; 0 when the window is
// unknown.
func (l Limits) Available() int {
	if l.Window <= 0 {
		return 0
	}
	return max(l.Window-l.Window/20-min(l.Reserve, l.Window/4), 1)
}

// Over reports whether a request of tokens would not fit: the next call
// must be preceded by a compaction.
func (l Limits) Over(tokens int) bool { return l.Window > 0 && tokens > l.Available() }

// Fits reports whether a request of tokens fits the window at all
// (reserve included): a request that does not is never sent.
func (l Limits) Fits(tokens int) bool {
	return l.Window <= 0 || tokens+min(l.Reserve, l.Window/4) <= l.Window
}

// Target is what a compaction aims at: three fifths of Available, so
// that the session runs a while before the next one.
func (l Limits) Target() int { return l.Available() * 3 / 5 }

// Keep is the budget of the recent messages kept verbatim: three tenths
// of Available.
func (l Limits) Keep() int { return l.Available() * 3 / 10 }

// SummaryTokens is the max_tokens of a summary call: an eighth of
// Available, between 256 and 4,096.
func (l Limits) SummaryTokens() int { return min(max(l.Available()/8, 256), 4096) }

// Assumed returns l with an unknown window taken to be one that a
// request of tokens just fills, so that a compaction by hand (or after
// an overflow whose refusal named no window) still has a size to aim at.
func (l Limits) Assumed(tokens int) Limits {
	if l.Window <= 0 {
		l.Window = (tokens + l.Reserve) * 20 / 19
	}
	return l
}

// ErrNoProgress is returned when nothing is left to compact: the recent
// messages that are always kept are all the view holds, or a compaction
// would not make the view smaller.
var ErrNoProgress = errors.New("nothing left to compact")

// Plan is what one compaction does.
type Plan struct {
	// Block is the compaction block to store; for the summary method
	// its Summary is set by Finish.
	Block message.Compaction
	// Fold is what a summary replaces (view messages before the cut,
	// an earlier summary first); nil for the stub method.
	Fold []message.Message
	// Kept is how many view messages stay verbatim.
	Kept int
	// Folded counts the stored messages the summary replaces; Stubbed
	// the messages whose tool results become stubs.
	Folded, Stubbed int

	stored []message.Message
	fixed  int
	// estBefore is the view's size before, estimated from its bytes as
	// tokensAfter is: progress is judged on one basis (the provider's
	// count of the last request, which before may be, can be smaller
	// than the byte estimate, and would make every compaction look like
	// no progress).
	estBefore int
}

// NewPlan plans a compaction of stored (whose view is view, of size
// before tokens). It keeps the newest messages whose estimate fits
// lim.Keep verbatim (at least the newest message, with the assistant
// message its tool results answer: the cut never falls between a
// tool_use and its tool_result). If stubbing the tool results before
// them brings the view to lim.Target, that is the plan (method stub);
// otherwise, or when trigger is manual, everything before them is
// summarised (method summary). It fails with ErrNoProgress when there is
// nothing before them.
func NewPlan(stored, view []message.Message, lim Limits, trigger string, before int) (Plan, error) {
	prev, _ := Latest(stored)
	start := 0
	if prev != nil && prev.Summary != "" && len(view) > 0 && !isRegular(stored, view[0].ID) {
		start = 1 // view[0] is the earlier summary
	}
	cut, sum := -1, 0
	for i := len(view) - 1; i > start; i-- {
		sum += Tokens(view[i:i+1], 0)
		if view[i].Role == message.RoleTool {
			continue
		}
		if cut >= 0 && sum > lim.Keep() {
			break
		}
		cut = i
	}
	if cut < 0 {
		return Plan{}, ErrNoProgress
	}
	through := view[cut-1].ID
	p := Plan{stored: stored, fixed: lim.Fixed, Kept: len(view) - cut, estBefore: Tokens(view, lim.Fixed)}
	for _, m := range view[start:cut] {
		if m.Role == message.RoleTool && hasLongResult(m) {
			p.Stubbed++
		}
	}
	if trigger != manualTrigger {
		b := message.Compaction{StubbedThrough: through, Trigger: trigger, Method: methodStub}
		if prev != nil {
			b.Summary, b.CompactedThrough = prev.Summary, prev.CompactedThrough
			if later(stored, prev.StubbedThrough, through) {
				b.StubbedThrough = prev.StubbedThrough
			}
		}
		sp := p
		sp.Block = b
		if after := sp.tokensAfter(); p.Stubbed > 0 && after < p.estBefore && after <= lim.Target() {
			sp.Block.TokensBefore, sp.Block.TokensAfter = int64(before), int64(after)
			return sp, nil
		}
	}
	p.Block = message.Compaction{CompactedThrough: through, Trigger: trigger, Method: methodSummary, TokensBefore: int64(before)}
	if prev != nil && later(stored, prev.StubbedThrough, through) {
		p.Block.StubbedThrough = prev.StubbedThrough
	}
	p.Fold = view[:cut]
	for _, m := range view[start:cut] {
		if isRegular(stored, m.ID) {
			p.Folded++
		}
	}
	return p, nil
}

// Wire names of the triggers and methods (protocol's).
const (
	manualTrigger = "manual"
	methodStub    = "stub"
	methodSummary = "summary"
	methodDrop    = "drop"
)

// Finish completes a summary plan with the summary text and returns the
// block to store. It fails with ErrNoProgress if the view would not get
// smaller (both sizes estimated from the view's bytes).
func (p Plan) Finish(summary string) (message.Compaction, error) {
	b := p.Block
	b.Summary = summary
	p.Block = b
	after := p.tokensAfter()
	if after >= p.estBefore {
		return message.Compaction{}, ErrNoProgress
	}
	b.TokensAfter = int64(after)
	return b, nil
}

// Drop completes a summary plan whose summary call failed: the folded
// messages leave the model's view without a summary, and the view says
// so (an earlier summary is kept). note says why.
func (p Plan) Drop(note string) (message.Compaction, error) {
	prev, _ := Latest(p.stored)
	text := ""
	if prev != nil && prev.Summary != "" {
		text = prev.Summary + "\n\n"
	}
	text += "[" + note + "]"
	b, err := p.Finish(text)
	b.Method = methodDrop
	return b, err
}

// tokensAfter estimates the view once p.Block is stored.
func (p Plan) tokensAfter() int {
	stored := make([]message.Message, len(p.stored), len(p.stored)+1)
	copy(stored, p.stored)
	stored = append(stored, message.Message{ID: "msg_planned", Role: message.RoleUser, Status: message.StatusComplete,
		Content: []message.Block{{Type: message.BlockCompaction, Compaction: &p.Block}}})
	return Tokens(View(stored), p.fixed)
}

// isRegular reports whether id is a stored message other than a
// compaction message.
func isRegular(stored []message.Message, id string) bool {
	i := indexOf(stored, id)
	return i >= 0 && !IsCompaction(stored[i])
}

// later reports whether message a is stored after message b.
func later(stored []message.Message, a, b string) bool {
	if a == "" {
		return false
	}
	ia := indexOf(stored, a)
	return ia >= 0 && ia > indexOf(stored, b)
}

func hasLongResult(m message.Message) bool {
	for _, b := range m.Content {
		if stubbable(b) {
			return true
		}
	}
	return false
}
