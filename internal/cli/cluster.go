package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/metis-agent/metis/client"
)

// clusterUsage is printed for a missing or unknown subcommand.
const clusterUsage = "usage: metis cluster status [--json] [--server URL] [--token-file F]"

// Cluster runs `metis cluster status [--json]`: the nodes of the
// cluster the server belongs to, the leases of the delegation trees
// and each node's projection lag, as the server sees them.
func Cluster(ctx context.Context, args []string, env Env) int {
	c, asJSON, code := statusCommand(ctx, args, env, "cluster", "status", clusterUsage, nil)
	if c == nil {
		return code
	}
	st, err := c.ClusterStatus(ctx)
	if client.IsNotClustered(err) {
		fmt.Fprintf(env.Stderr, "metis cluster status: %s runs single-node (started without --nats): there is no cluster\n", c.BaseURL)
		return 1
	}
	if err != nil {
		fmt.Fprintln(env.Stderr, "metis cluster status:", explain(err))
		return 1
	}
	if asJSON {
		printJSON(env.Stdout, st)
		return 0
	}
	printClusterStatus(env.Stdout, st)
	return 0
}

// statusCommand parses `metis NAME SUB [--json] [flags]` (more flags
// defined by flags) and returns the client of the server to ask, and
// whether to print JSON; nil and the exit code on a usage or client
// error (printed).
func statusCommand(ctx context.Context, args []string, env Env, name, sub, usage string, flags func(*flag.FlagSet)) (*client.Client, bool, int) {
	if len(args) == 0 || args[0] != sub {
		fmt.Fprintln(env.Stderr, usage)
		return nil, false, 2
	}
	fs, cf := newFlags(name+" "+sub, env)
	asJSON := fs.Bool("json", false, "print the server's answer as JSON")
	if flags != nil {
		flags(fs)
	}
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return nil, false, 2
	}
	if len(pos) > 0 {
		fmt.Fprintln(env.Stderr, usage)
		return nil, false, 2
	}
	c, ok := cf.client(ctx, name+" "+sub, env)
	if !ok {
		return nil, false, 1
	}
	return c, *asJSON, 0
}

// printJSON writes v as indented JSON.
func printJSON(out io.Writer, v any) {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// printClusterStatus writes the status as two tables: nodes, leases.
func printClusterStatus(out io.Writer, st client.ClusterStatus) {
	fmt.Fprintf(out, "cluster %s, stream %s: %d nodes, %d leases; catalog tail at sequence %d (answered by %s at %s)\n\n",
		cell(st.NATS), cell(st.Stream), len(st.Nodes), len(st.Leases), st.LastCatalogSeq, cell(st.Node), st.At.Format(time.RFC3339))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tADDRESS\tVERSION\tUP\tHEARTBEAT\tAPPLIED\tLAG\tTREES")
	for _, n := range st.Nodes {
		name := cell(n.Name)
		if n.Self {
			name += " *"
		}
		beat := "-"
		if !n.Heartbeat.IsZero() {
			beat = age(st.At.Sub(n.Heartbeat)) + " ago"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", name, cell(n.Address), cell(n.Version),
			age(st.At.Sub(n.Started)), beat, n.AppliedSeq, n.Lag, n.OwnedTrees)
	}
	_ = w.Flush()
	fmt.Fprintln(out)
	if len(st.Leases) == 0 {
		fmt.Fprintln(out, "no tree is leased")
		return
	}
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TREE\tOWNER\tREVISION\tAGE")
	for _, l := range st.Leases {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", cell(l.Tree), cell(l.Node), l.Revision, age(time.Duration(l.AgeSeconds*float64(time.Second))))
	}
	_ = w.Flush()
	if st.LeasesTruncated {
		fmt.Fprintf(out, "(only the first %d leases are listed)\n", len(st.Leases))
	}
}

// age is a duration rounded for a table: 950ms, 42s, 5m3s, 2h10m.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		s := d.Round(time.Second).String()
		if m, ok := strings.CutSuffix(s, "m0s"); ok {
			return m + "m"
		}
		return s
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s") // rounded to the minute: 2h10m0s
}

// cell is a server-given string made safe for a table: control
// characters and white space become spaces (the server is untrusted, and
// a tab or newline would break the columns), "-" for none.
func cell(s string) string {
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, s))
	if s == "" {
		return "-"
	}
	return s
}
