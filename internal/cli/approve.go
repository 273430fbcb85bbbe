package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// How metis send answers approval requests (docs/permissions.md).
type answerPolicy int

const (
	// askTerminal asks on the terminal: y allows once, a allows for the
	// session, n denies (with an optional reason).
	askTerminal answerPolicy = iota
	approveAll
	denyAll
	// denyNoTerminal denies at once: there is no terminal to ask on and
	// no flag said what to do, and a script must not wait until the
	// request times out.
	denyNoTerminal
)

// noTerminalReason is what the model reads when metis send could not ask.
const noTerminalReason = "metis send had no terminal to ask on (run it with --approve-all or --deny-all, or answer from another client)"

// terminal is implemented by readers that say whether they are a
// terminal (tests); an *os.File is one when it is a character device.
type terminal interface{ Terminal() bool }

func isTerminal(r io.Reader) bool {
	switch f := r.(type) {
	case terminal:
		return f.Terminal()
	case *os.File:
		st, err := f.Stat()
		return err == nil && st.Mode()&os.ModeCharDevice != 0
	}
	return false
}

// approver answers the approval requests a turn of metis send meets,
// one at a time, on its own goroutine: the stream is read meanwhile, so
// heartbeats are answered while the user thinks.
type approver struct {
	c      *client.Client
	sid    string
	env    Env
	policy answerPolicy
	lines  <-chan string // the terminal's lines (askTerminal)
	queue  chan client.PendingApproval
	seen   map[string]bool
}

func newApprover(ctx context.Context, c *client.Client, sid string, env Env, policy answerPolicy) *approver {
	a := &approver{c: c, sid: sid, env: env, policy: policy, queue: make(chan client.PendingApproval, 64), seen: map[string]bool{}}
	if policy == askTerminal {
		lines := make(chan string)
		a.lines = lines
		// The reader goroutine ends at the input's end or once ctx is done
		// and its read returns; a terminal's read cannot be interrupted,
		// and the process exits with the command.
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(env.Stdin)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return a
}

// offer queues the view's new requests (called on Follow's goroutine).
func (a *approver) offer(v *client.View) {
	for _, p := range v.PendingApprovals() {
		if a.seen[p.ApprovalID] {
			continue
		}
		a.seen[p.ApprovalID] = true
		select {
		case a.queue <- p:
		default: // more than 64 unanswered: the server's timeout denies the rest
			fmt.Fprintf(a.env.Stderr, "[approval %s of %s left to the server's timeout]\n", p.ApprovalID, p.ToolName)
		}
	}
}

// run answers queued requests until ctx is done.
func (a *approver) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-a.queue:
			a.answer(ctx, p)
		}
	}
}

func (a *approver) answer(ctx context.Context, p client.PendingApproval) {
	what := a.describe(p)
	var ans protocol.ApprovalAnswer
	switch a.policy {
	case approveAll:
		ans = protocol.ApprovalAnswer{Decision: protocol.DecisionAllow, Scope: protocol.ScopeOnce}
		fmt.Fprintf(a.env.Stderr, "[approval %s: allowed (--approve-all)]\n", what)
	case denyAll:
		ans = protocol.ApprovalAnswer{Decision: protocol.DecisionDeny, Reason: "denied by metis send --deny-all"}
		fmt.Fprintf(a.env.Stderr, "[approval %s: denied (--deny-all)]\n", what)
	case denyNoTerminal:
		ans = protocol.ApprovalAnswer{Decision: protocol.DecisionDeny, Reason: noTerminalReason}
		fmt.Fprintf(a.env.Stderr, "[approval %s: denied: no terminal to ask on; use --approve-all or --deny-all]\n", what)
	default:
		var ok bool
		if ans, ok = a.ask(ctx, p, what); !ok {
			return // the input ended or the turn did: the request stays for another client
		}
	}
	res, err := a.c.Approve(ctx, a.sid, p.ApprovalID, ans)
	switch {
	case client.IsApprovalResolved(err):
		fmt.Fprintf(a.env.Stderr, "[approval %s: decided already: %s (%s)]\n", what, res.Decision, res.Reason)
	case err != nil && ctx.Err() == nil:
		fmt.Fprintf(a.env.Stderr, "[approval %s: %s]\n", what, explain(err))
	}
}

// ask asks on the terminal; false when the input ended.
func (a *approver) ask(ctx context.Context, p client.PendingApproval, what string) (protocol.ApprovalAnswer, bool) {
	fmt.Fprintf(a.env.Stderr, "\n[approval] %s\n", what)
	if p.Reason != "" {
		fmt.Fprintf(a.env.Stderr, "  why it asks: %s\n", Printable(p.Reason))
	}
	session := ""
	if len(p.SessionRules) > 0 {
		session = ", a = allow for this session (" + strings.Join(p.SessionRules, ", ") + ")"
	}
	for {
		fmt.Fprintf(a.env.Stderr, "  y = allow once%s, n = deny: ", session)
		line, ok := a.readLine(ctx)
		if !ok {
			return protocol.ApprovalAnswer{}, false
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return protocol.ApprovalAnswer{Decision: protocol.DecisionAllow, Scope: protocol.ScopeOnce}, true
		case "a", "always":
			if session != "" {
				return protocol.ApprovalAnswer{Decision: protocol.DecisionAllow, Scope: protocol.ScopeSession}, true
			}
		case "n", "no":
			fmt.Fprint(a.env.Stderr, "  reason for the model (optional): ")
			reason, _ := a.readLine(ctx)
			return protocol.ApprovalAnswer{Decision: protocol.DecisionDeny, Reason: strings.TrimSpace(reason)}, true
		}
	}
}

func (a *approver) readLine(ctx context.Context) (string, bool) {
	select {
	case <-ctx.Done():
		return "", false
	case l, ok := <-a.lines:
		return l, ok
	}
}

// describe says what a request would do: the tool and its targets (the
// command line, the paths, the URL), and the worker it comes from.
func (a *approver) describe(p client.PendingApproval) string {
	s := p.ToolName
	if len(p.Targets) > 0 {
		s += ": " + strings.Join(p.Targets, ", ")
	} else if len(p.Input) > 0 {
		s += " " + string(p.Input)
	}
	if p.SessionID != "" && p.SessionID != a.sid {
		s += " (worker " + p.SessionID + ")"
	}
	return Printable(s) // the whole command, nothing hidden by an escape sequence
}
