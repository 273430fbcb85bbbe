package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
)

// Sessions runs `metis sessions [--json]`: list the server's sessions.
func Sessions(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("sessions", env)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseInterleaved(fs, args); err != nil {
		return 2
	}
	c, ok := cf.client("sessions", env)
	if !ok {
		return 1
	}
	ss, err := c.Sessions(ctx)
	if err != nil {
		fmt.Fprintln(env.Stderr, "metis sessions:", explain(err))
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(ss)
		return 0
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tMODEL\tTURNS\tCOST\tSTATE\tPARENT\tWORKSPACE")
	for _, s := range ss {
		state := "idle"
		if s.CurrentTurnStatus != nil {
			state = *s.CurrentTurnStatus
		}
		parent := "-"
		if s.ParentSessionID != nil {
			parent = *s.ParentSessionID
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t$%.4f\t%s\t%s\t%s\n", s.ID, s.ActiveModel, s.TurnCount, s.CostSoFarUSD, state, parent, s.WorkspacePath)
	}
	_ = w.Flush()
	return 0
}
