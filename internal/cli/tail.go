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

// Tail runs `metis tail SESSION [--filter preset:full|TYPES] [--since ID]
// [--json | --events] [--workers]`: print the session as it happens,
// reconnecting after drops without losing or repeating anything. By
// default it reads as a chat (the user's messages, the answer's text as
// it streams, a line per tool call, approval, worker and turn end; no
// raw deltas); --events prints one line per event (id, type, session,
// payload) and --json each event's JSON envelope.
func Tail(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("tail", env)
	filter := fs.String("filter", protocol.PresetFull, "a preset, or event types separated by commas")
	since := fs.String("since", "", "start after this event id (default: from now, after a snapshot)")
	asJSON := fs.Bool("json", false, "print each event's JSON envelope, one per line")
	asEvents := fs.Bool("events", false, "print one line per event: id, type, session and payload")
	workers := fs.Bool("workers", false, "include the events of worker sessions")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.Stderr, "usage: metis tail SESSION [--filter preset:full|TYPES] [--since ID] [--json | --events] [--workers]")
		return 2
	}
	if *asJSON && *asEvents {
		fmt.Fprintln(env.Stderr, "metis tail: --json and --events contradict each other")
		return 2
	}
	var f any = *filter
	if !strings.HasPrefix(*filter, "preset:") || *workers {
		pf := protocol.Filter{IncludeWorkerSessions: *workers}
		if strings.HasPrefix(*filter, "preset:") {
			s := protocol.Subscribe{Preset: *filter}
			r, err := s.Resolve()
			if err != nil {
				fmt.Fprintln(env.Stderr, "metis tail:", err)
				return 2
			}
			pf.EventTypes = r.EventTypes
		} else {
			for _, t := range strings.Split(*filter, ",") {
				if t = strings.TrimSpace(t); t != "" {
					pf.EventTypes = append(pf.EventTypes, t)
				}
			}
		}
		f = pf
	}
	c, ok := cf.client(ctx, "tail", env)
	if !ok {
		return 1
	}
	streams := wantsStreaming(f)
	chat := newChatPrinter(env.Stdout, pos[0])
	readable := !*asJSON && !*asEvents
	// Without --since, tail starts from now: from a snapshot, so that an
	// answer streaming at that moment is printed so far (its deltas
	// then continue it) rather than joined mid-sentence.
	err = c.Follow(ctx, pos[0], client.FollowOptions{Filter: f, Since: *since, OnUpdate: func(u client.Update) {
		switch u.Kind {
		case client.Subscribed:
			if !u.Resumed && streams {
				var c *chatPrinter
				if readable {
					c = chat
				}
				printInFlight(env, u.View, *asJSON, c)
			}
		case client.Reconnecting:
			fmt.Fprintf(env.Stderr, "[reconnecting (%d): %v]\n", u.Attempt, u.Err)
		case client.Resynced:
			fmt.Fprintln(env.Stderr, "[the gap could not be replayed; continuing from a fresh snapshot]")
		case client.EventApplied:
			if *asJSON {
				b, _ := json.Marshal(u.Event)
				fmt.Fprintln(env.Stdout, string(b))
				return
			}
			if readable {
				chat.event(u.Event)
				return
			}
			fmt.Fprintf(env.Stdout, "%s %-22s %s %s\n", u.Event.ID, u.Event.Type, u.Event.SessionID, compact(u.Event.Payload))
		}
	}})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(env.Stderr, "metis tail:", explain(err))
		return 1
	}
	return 0
}

func compact(p json.RawMessage) string {
	s := string(p)
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// wantsStreaming reports whether a tail filter (a preset name or a
// protocol.Filter) includes a streaming event type.
func wantsStreaming(f any) bool {
	var types []string
	switch x := f.(type) {
	case string:
		r, err := (&protocol.Subscribe{Preset: x}).Resolve()
		if err != nil {
			return false
		}
		types = r.EventTypes
	case protocol.Filter:
		types = x.EventTypes
	}
	for _, t := range types {
		if protocol.FamilyOf(protocol.EventType(t)) == protocol.FamilyStreaming {
			return true
		}
	}
	return false
}

// printInFlight prints the assistant message a snapshot caught
// streaming, as it was so far: one line before the events that continue
// it ({"in_flight_message": …, "snapshot_at_event_id": …} with --json).
func printInFlight(env Env, v *client.View, asJSON bool, chat *chatPrinter) {
	for _, m := range v.Messages {
		if m.Status != string(protocol.StatusStreaming) {
			continue
		}
		if chat != nil && !asJSON {
			chat.soFar(m.Text())
			continue
		}
		b, _ := json.Marshal(m)
		if asJSON {
			line, _ := json.Marshal(map[string]any{"in_flight_message": json.RawMessage(b), "snapshot_at_event_id": v.LastEventID})
			fmt.Fprintln(env.Stdout, string(line))
			continue
		}
		fmt.Fprintf(env.Stdout, "%s %-22s %s %s\n", v.LastEventID, "(so far)", m.SessionID, compact(b))
	}
}
