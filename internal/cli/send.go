package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// Send runs `metis send SESSION "text"`: submit a turn and stream its
// answer to stdout (text as it arrives; tool calls and errors as short
// lines on stderr). A tool call that waits for approval is asked about
// on the terminal (y allow once, a allow for the session, n deny), or
// answered by --approve-all or --deny-all; with neither and no terminal
// it is denied at once, with a message saying so (a script must not
// wait for the request's timeout). It exits 0 when the turn completes,
// 1 if it fails or is cancelled, and 3 if it completed but a call was
// refused permission (denied by an answer, a timeout, a rule or plan
// mode).
func Send(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("send", env)
	approveAllFlag := fs.Bool("approve-all", false, "allow every approval request of the turn (once each)")
	denyAllFlag := fs.Bool("deny-all", false, "deny every approval request of the turn")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) < 2 {
		fmt.Fprintln(env.Stderr, `usage: metis send [--approve-all | --deny-all] SESSION "text"`)
		return 2
	}
	if *approveAllFlag && *denyAllFlag {
		fmt.Fprintln(env.Stderr, "metis send: --approve-all and --deny-all contradict each other")
		return 2
	}
	policy := askTerminal
	switch {
	case *approveAllFlag:
		policy = approveAll
	case *denyAllFlag:
		policy = denyAll
	case env.Stdin == nil || !isTerminal(env.Stdin):
		policy = denyNoTerminal
	}
	sid, text := pos[0], strings.Join(pos[1:], " ")
	c, ok := cf.client(ctx, "send", env)
	if !ok {
		return 1
	}
	interrupted := ctx
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	ap := newApprover(ctx, c, sid, env, policy)
	answering := make(chan struct{})
	go func() {
		defer close(answering)
		ap.run(ctx)
	}()
	defer func() { stop(); <-answering }()
	turn, code, refused, ended := "", 0, false, false
	var submitErr error
	err = c.Follow(ctx, sid, client.FollowOptions{NoSnapshot: true, OnUpdate: func(u client.Update) {
		switch u.Kind {
		case client.Subscribed:
			if turn == "" {
				// Not cut by an interrupt: a turn the server accepted
				// must be known, to be cancelled.
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitTimeout)
				turn, submitErr = c.Submit(sctx, sid, text)
				cancel()
				if submitErr != nil {
					stop()
				}
			}
		case client.Reconnecting:
			fmt.Fprintln(env.Stderr, "[reconnecting…]")
		case client.EventApplied:
			ap.offer(u.View) // a worker's requests too: they reach the planner's stream
			if u.Event.TurnID == nil || *u.Event.TurnID != turn {
				return
			}
			typ := protocol.EventType(u.Event.Type)
			printEvent(env, typ, u.Event.Payload)
			if typ == protocol.EventToolFailed {
				var p protocol.ToolFailedPayload
				_ = json.Unmarshal(u.Event.Payload, &p)
				refused = refused || p.ErrorClass == "permission_denied"
			}
			if t := u.View.Turn; t.ID == turn && t.Status != protocol.TurnStatusInFlight {
				switch {
				case t.Status != "completed":
					code = 1
				case refused:
					code = 3
				}
				ended = true
				stop()
			}
		}
	}})
	if submitErr != nil && interrupted.Err() == nil {
		fmt.Fprintln(env.Stderr, "metis send:", explain(submitErr))
		return 1
	}
	if interrupted.Err() != nil && !ended {
		return cancelInterrupted(c, sid, turn, env)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(env.Stderr, "metis send:", explain(err))
		return 1
	}
	return code
}

func printEvent(env Env, typ protocol.EventType, payload json.RawMessage) {
	var p map[string]any
	_ = json.Unmarshal(payload, &p)
	switch typ {
	case protocol.EventTextDelta:
		fmt.Fprint(env.Stdout, p["text"])
	case protocol.EventMessageComplete:
		fmt.Fprintln(env.Stdout)
	case protocol.EventToolCalled:
		in, _ := json.Marshal(p["input"])
		note(env, "[tool %v %s]\n", p["tool_name"], in)
	case protocol.EventToolFailed:
		note(env, "[tool %v failed: %v: %v]\n", p["tool_name"], p["error_class"], p["message"])
	case protocol.EventLLMCallFailed:
		note(env, "[model error %v: %v]\n", p["error_class"], p["message"])
	case protocol.EventApprovalResolved:
		note(env, "[approval %v: %v (%v)]\n", p["approval_id"], p["decision"], p["reason"])
	case protocol.EventTurnCancelled:
		note(env, "[cancelled: %v]\n", p["reason"])
	case protocol.EventDelegateStarted:
		note(env, "[worker %v: %v]\n", p["worker_session_id"], p["task"])
	}
}

// note prints a line about the turn on stderr (the terminal, when a
// person runs metis send), made Printable; the answer on stdout stays as
// the model wrote it, for scripts that save it.
func note(env Env, format string, args ...any) {
	fmt.Fprint(env.Stderr, Printable(fmt.Sprintf(format, args...)))
}

// submitTimeout bounds metis send's submit.
const submitTimeout = 30 * time.Second

// cancelGrace bounds the cancel metis send makes when interrupted.
const cancelGrace = 5 * time.Second

// cancelInterrupted cancels the turn an interrupted metis send started
// (if it had started one) and returns the exit code: 130, as a shell
// reports a command ended by SIGINT.
func cancelInterrupted(c *client.Client, sid, turn string, env Env) int {
	if turn == "" {
		fmt.Fprintln(env.Stderr, "\n[interrupted before the turn started]")
		return 130
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	if err := c.Cancel(ctx, sid, turn, "user_cancel"); err != nil {
		fmt.Fprintf(env.Stderr, "\nmetis send: interrupted, but cancelling turn %s failed: %s\n", turn, explain(err))
		return 130
	}
	fmt.Fprintf(env.Stderr, "\n[interrupted: turn %s cancelled]\n", turn)
	return 130
}
