package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/metis-agent/metis/client"
)

// mcpUsage is printed for a missing or unknown subcommand.
const mcpUsage = "usage: metis mcp list [--tools] [--json] [--session ID] [--server URL] [--token-file F]"

// MCP runs `metis mcp list`: the server's MCP servers (name, scope,
// transport, state, tools, pid, restarts, last error), with --tools
// each server's tools, with --session the servers that session's turns
// use.
func MCP(ctx context.Context, args []string, env Env) int {
	var tools *bool
	var session *string
	c, asJSON, code := statusCommand(ctx, args, env, "mcp", "list", mcpUsage, func(fs *flag.FlagSet) {
		tools = fs.Bool("tools", false, "list each server's tools too")
		session = fs.String("session", "", "the servers this session's turns use (config.yaml's and the session's own)")
	})
	if c == nil {
		return code
	}
	var (
		st  client.MCPStatus
		err error
	)
	if *session != "" {
		st, err = c.SessionMCP(ctx, *session)
	} else {
		st, err = c.MCP(ctx)
	}
	if err != nil {
		fmt.Fprintln(env.Stderr, "metis mcp list:", explain(err))
		return 1
	}
	if asJSON {
		printJSON(env.Stdout, st)
		return 0
	}
	printMCP(env.Stdout, st, *tools, time.Now())
	return 0
}

// printMCP writes the servers as a table, then, with tools, each
// server's tools.
func printMCP(out io.Writer, st client.MCPStatus, tools bool, now time.Time) {
	if st.ConfigError != "" {
		fmt.Fprintf(out, "config.yaml's mcp_servers: %s (the servers are as they were)\n\n", cell(st.ConfigError))
	}
	if len(st.Servers) == 0 {
		fmt.Fprintln(out, "no MCP servers (add them under mcp_servers in <home>/config.yaml; see docs/mcp.md)")
		return
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSCOPE\tTRANSPORT\tSTATE\tTOOLS\tPID\tRESTARTS\tLAST ERROR")
	for _, s := range st.Servers {
		offered := 0
		for _, t := range s.Tools {
			if !t.Skipped {
				offered++
			}
		}
		ntools := strconv.Itoa(offered)
		if skipped := len(s.Tools) - offered; skipped > 0 {
			ntools += fmt.Sprintf(" (+%d skipped)", skipped)
		}
		pid := "-"
		if s.PID > 0 {
			pid = strconv.Itoa(s.PID)
		}
		state := s.State
		if s.RetryAt != nil && s.RetryAt.After(now) {
			state += " (retry in " + age(s.RetryAt.Sub(now)) + ")"
		}
		scope := s.Scope
		if n := len(s.SessionIDs); n > 0 {
			scope += fmt.Sprintf(" (%d)", n)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", cell(s.Name), cell(scope), cell(s.Transport), cell(state), ntools, pid,
			s.Restarts, cell(clip(s.LastError, 120)))
	}
	_ = w.Flush()
	if !tools {
		return
	}
	for _, s := range st.Servers {
		if len(s.Tools) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s:\n", cell(s.Name))
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, t := range s.Tools {
			name, note := cell(t.Name), cell(t.Kind)
			if t.Skipped {
				name, note = "("+cell(t.Tool)+" not offered)", ""
			}
			if t.Problem != "" {
				note += " " + cell(t.Problem)
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\n", name, note, cell(clip(t.Description, 80)))
		}
		_ = w.Flush()
	}
}

// clip cuts s to at most n runes, with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
