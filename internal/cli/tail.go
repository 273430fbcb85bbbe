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
// [--json] [--workers]`: print the session's events as they happen, one
// per line, reconnecting after drops without losing or repeating any.
func Tail(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("tail", env)
	filter := fs.String("filter", protocol.PresetFull, "a preset, or event types separated by commas")
	since := fs.String("since", "", "start after this event id (default: from now, after a snapshot)")
	asJSON := fs.Bool("json", false, "print each event's JSON envelope")
	workers := fs.Bool("workers", false, "include the events of worker sessions")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.Stderr, "usage: metis tail SESSION [--filter preset:full|TYPES] [--since ID] [--json] [--workers]")
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
	err = c.Follow(ctx, pos[0], client.FollowOptions{Filter: f, Since: *since, NoSnapshot: *since == "", OnUpdate: func(u client.Update) {
		switch u.Kind {
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
