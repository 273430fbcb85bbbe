package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/metis-agent/metis/client"
)

// Sessions runs `metis sessions [--json] [--page N]`: list the server's
// sessions, newest first, walking the listing a page at a time.
func Sessions(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("sessions", env)
	asJSON := fs.Bool("json", false, "print JSON (one array of every session)")
	page := fs.Int("page", 0, "sessions fetched per request (0: the server's default)")
	if _, err := parseInterleaved(fs, args); err != nil {
		return 2
	}
	if *page < 0 {
		fmt.Fprintln(env.Stderr, "metis sessions: --page must not be negative")
		return 2
	}
	c, ok := cf.client(ctx, "sessions", env)
	if !ok {
		return 1
	}
	if *asJSON {
		ss, err := c.Sessions(ctx)
		if err != nil {
			fmt.Fprintln(env.Stderr, "metis sessions:", explain(err))
			return 1
		}
		if ss == nil {
			ss = []client.Session{}
		}
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(ss)
		return 0
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	// The tab writer holds the rows until the last page, so the columns
	// line up across pages; the header waits for the first page, so a
	// refused listing prints only its error.
	header := false
	now := time.Now()
	err := c.EachSessionPage(ctx, *page, func(ss []client.Session) error {
		if !header {
			fmt.Fprintln(w, "ID\tLAST ACTIVITY\tMODEL\tTURNS\tCOST\tSTATE\tPARENT\tWORKSPACE\tTITLE")
			header = true
		}
		for _, s := range ss {
			state := "idle"
			if s.CurrentTurnStatus != nil {
				state = *s.CurrentTurnStatus
			}
			parent := "-"
			if s.ParentSessionID != nil {
				parent = *s.ParentSessionID
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t$%.4f\t%s\t%s\t%s\t%s\n", s.ID, lastActivity(now, s), s.ActiveModel, s.TurnCount, s.CostSoFarUSD,
				state, parent, s.WorkspacePath, shortTitle(s.Title))
		}
		return nil
	})
	_ = w.Flush()
	if err != nil {
		fmt.Fprintln(env.Stderr, "metis sessions:", explain(err))
		return 1
	}
	return 0
}

// lastActivity is a session's last activity for the table (its
// creation before any turn).
func lastActivity(now time.Time, s client.Session) string {
	t := s.LastActivityAt
	if t.IsZero() {
		t = s.CreatedAt
	}
	return Ago(now, t)
}

// Ago is how long before now t was, for people: "just now", "5m ago",
// "3h ago" within a day, then the local date and time ("-" for none).
func Ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case t.IsZero():
		return "-"
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02 15:04")
}

// maxTitleColumn bounds the TITLE column, in runes.
const maxTitleColumn = 40

// shortTitle is a session title for the table: "-" for none, cut at
// maxTitleColumn runes with "…". Titles hold no tab or newline (the
// server collapses white space), so they cannot break the columns;
// control characters are dropped anyway, the server being untrusted.
func shortTitle(t string) string {
	t = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, t)
	t = strings.TrimSpace(t)
	if t == "" {
		return "-"
	}
	if r := []rune(t); len(r) > maxTitleColumn {
		return strings.TrimRight(string(r[:maxTitleColumn-1]), " ") + "…"
	}
	return t
}
