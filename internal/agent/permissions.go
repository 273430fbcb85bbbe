package agent

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// DefaultMaxPendingApprovals bounds the approval requests one turn has
// open at once; the calls of a round beyond it ask, in order, as earlier
// requests are answered.
const DefaultMaxPendingApprovals = 16

// Permissions is how a turn's tool calls are decided and, when they must
// ask, how the user is asked (docs/permissions.md). The session manager
// implements it for each turn, keeping the pending requests under the
// lock its cancels take; a Turn without one runs every call.
type Permissions interface {
	// Mode is the session's mode now (it may change during the turn).
	Mode() permission.Mode
	// Check decides a call in the session's mode, with its rules.
	Check(c *permission.Call) permission.Verdict
	// Open registers an approval request and returns its id and when it
	// times out. The request's resolution is sent on out exactly once
	// (out must have room): a user's answer, the timeout, a session rule
	// an answer added, or Settle.
	Open(req Approval, out chan<- Answer) (id string, expires time.Time, err error)
	// Settle decides request id with res unless it is decided already,
	// and returns the resolution that won.
	Settle(id string, res protocol.ApprovalResolution) protocol.ApprovalResolution
	// Close forgets request id once its approval.resolved is committed
	// (or the turn gave up on it): later answers are told from the store.
	Close(id string)
	// RulesSession is the session whose rules an allow with scope
	// session adds to (the delegation tree's top session).
	RulesSession() string
}

// Approval is a tool call that must ask the user.
type Approval struct {
	ToolUseID string
	ToolName  string
	MessageID string
	Input     json.RawMessage
	Call      *permission.Call
	Verdict   permission.Verdict
	// Targets are what the call's rules match on (Targeted), for
	// display.
	Targets []string
	// SessionRules are what an allow with scope session adds.
	SessionRules []string
}

// Answer is the resolution of a request, sent to the turn's dispatcher.
type Answer struct {
	ID  string
	Res protocol.ApprovalResolution
}

// check decides a call before it starts. Calls that will fail anyway
// (no such tool, no name, input that did not parse) are let through to
// fail as they do without permissions.
func (r *run) check(c callResult, u message.Block) (permission.Verdict, *permission.Call) {
	allow := permission.Verdict{Action: permission.Allow}
	p := r.t.Permissions
	if p == nil || u.Name == "" || c.acc.InputError(u.ID) != nil {
		return allow, nil
	}
	t, ok := r.cfg.Tools.Get(u.Name)
	if !ok {
		return allow, nil
	}
	call := &permission.Call{Tool: u.Name, Kind: tool.KindOf(t), Input: u.Input, Workspace: r.t.Workspace}
	if tg, ok := t.(tool.Targeted); ok {
		call.Targeter = tg
	}
	return p.Check(call), call
}

// deniedMessage is what the model reads (and tool.failed carries) when
// a call is refused.
func deniedMessage(v permission.Verdict, mode permission.Mode) string {
	msg := "permission denied: " + v.Reason
	if mode == permission.ModePlan && v.Rule == "" {
		msg += ". Plan mode: explore with the read-only tools and describe the changes you would make; the user switches modes to carry them out"
	}
	return msg
}

// refusedMessage is what the model reads when a request was denied.
func refusedMessage(res protocol.ApprovalResolution, timeout time.Duration) string {
	switch res.Reason {
	case protocol.ApprovalReasonTimeout:
		if timeout > 0 {
			return "permission denied: nobody answered the approval request within " + timeout.String() + ", so the call was refused"
		}
		return "permission denied: nobody answered the approval request in time, so the call was refused"
	case protocol.ApprovalReasonCancelled:
		return "permission denied: the turn was cancelled while the call waited for approval"
	}
	msg := "permission denied: the user refused this tool call"
	if t := strings.TrimSpace(res.Message); t != "" {
		msg += ", saying: " + t
	}
	return msg
}

// offered returns the tools offered to the model in the session's mode,
// and a note for the system prompt naming those it leaves out: plan
// mode does not offer the tools it refuses (the model learns of them
// from the note, enough to plan with).
func (r *run) offered(modelID string) ([]model.ToolSpec, string) {
	specs := r.cfg.Tools.SpecsFor(modelID)
	p := r.t.Permissions
	if p == nil {
		return specs, ""
	}
	mode := p.Mode()
	out := specs[:0:0]
	var left []string
	for _, s := range specs {
		if t, ok := r.cfg.Tools.Get(s.Name); ok && permission.Refuses(mode, tool.KindOf(t)) {
			left = append(left, s.Name)
			continue
		}
		out = append(out, s)
	}
	if len(left) == 0 {
		return specs, ""
	}
	return out, "\n\nThe session is in plan mode: tools that change files or run commands (" + strings.Join(left, ", ") +
		") are not available. Explore with the read-only tools, then answer with a plan: the changes you would make, " +
		"file by file. The user switches modes to carry it out."
}
