package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// Send runs `metis send SESSION "text"`: submit a turn and stream its
// answer to stdout (text as it arrives; tool calls and errors as short
// lines on stderr). It exits 0 when the turn completes, 1 if it fails or
// is cancelled.
func Send(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("send", env)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) < 2 {
		fmt.Fprintln(env.Stderr, `usage: metis send SESSION "text"`)
		return 2
	}
	sid, text := pos[0], strings.Join(pos[1:], " ")
	c, ok := cf.client(ctx, "send", env)
	if !ok {
		return 1
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	turn, code := "", 0
	var submitErr error
	err = c.Follow(ctx, sid, client.FollowOptions{NoSnapshot: true, OnUpdate: func(u client.Update) {
		switch u.Kind {
		case client.Subscribed:
			if turn == "" {
				turn, submitErr = c.Submit(ctx, sid, text)
				if submitErr != nil {
					stop()
				}
			}
		case client.Reconnecting:
			fmt.Fprintln(env.Stderr, "[reconnecting…]")
		case client.EventApplied:
			if u.Event.TurnID == nil || *u.Event.TurnID != turn {
				return
			}
			printEvent(env, protocol.EventType(u.Event.Type), u.Event.Payload)
			if t := u.View.Turn; t.ID == turn && t.Status != protocol.TurnStatusInFlight {
				if t.Status != "completed" {
					code = 1
				}
				stop()
			}
		}
	}})
	if submitErr != nil {
		fmt.Fprintln(env.Stderr, "metis send:", explain(submitErr))
		return 1
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
		fmt.Fprintf(env.Stderr, "[tool %v %s]\n", p["tool_name"], in)
	case protocol.EventToolFailed:
		fmt.Fprintf(env.Stderr, "[tool %v failed: %v: %v]\n", p["tool_name"], p["error_class"], p["message"])
	case protocol.EventLLMCallFailed:
		fmt.Fprintf(env.Stderr, "[model error %v: %v]\n", p["error_class"], p["message"])
	case protocol.EventTurnCancelled:
		fmt.Fprintf(env.Stderr, "[cancelled: %v]\n", p["reason"])
	case protocol.EventDelegateStarted:
		fmt.Fprintf(env.Stderr, "[worker %v: %v]\n", p["worker_session_id"], p["task"])
	}
}
