package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/metis-agent/metis/client"
)

// Turns runs `metis turns SESSION [--json]`: a session's turns, oldest
// first, with what files each changed and whether it can be reverted.
func Turns(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("turns", env)
	asJSON := fs.Bool("json", false, "print the server's JSON (every page's turns as one array)")
	c, pos, code := checkpointCommand(ctx, "turns", fs, cf, args, 1, "SESSION", env)
	if c == nil {
		return code
	}
	var all []client.TurnInfo
	var status string
	before := ""
	for {
		l, err := c.Turns(ctx, pos[0], before, 0)
		if err != nil {
			fmt.Fprintln(env.Stderr, "metis turns:", explain(err))
			return 1
		}
		all = append(l.Turns, all...) // each page is older than the last
		if !l.Checkpoints.Enabled {
			status = l.Checkpoints.Reason
		}
		if !l.HasMore || l.Next == "" || l.Next == before {
			break
		}
		before = l.Next
	}
	if *asJSON {
		if all == nil {
			all = []client.TurnInfo{}
		}
		printJSON(env.Stdout, all)
		return 0
	}
	if status != "" {
		fmt.Fprintln(env.Stderr, "metis turns: checkpoints are off:", status)
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TURN\tSTATUS\tREVERT\tCHANGED\tPROMPT")
	for _, t := range all {
		revert := "-"
		if t.Revertible {
			revert = "yes"
		}
		changed := "-"
		if t.Changes != nil {
			var names []string
			for _, f := range t.Changes.Files {
				names = append(names, f.Path)
			}
			changed = fmt.Sprintf("%d file(s) +%d -%d", t.Changes.FilesChanged, t.Changes.Additions, t.Changes.Deletions)
			if len(names) > 0 {
				changed += ": " + shortTitle(strings.Join(names, " "))
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.TurnID, t.Status, revert, changed, shortTitle(t.Prompt))
	}
	_ = w.Flush()
	return 0
}

// Revert runs `metis revert SESSION TURN [--json]`: put the workspace's
// files back as they were before the turn, and print how to undo it.
func Revert(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("revert", env)
	asJSON := fs.Bool("json", false, "print the server's JSON answer")
	c, pos, code := checkpointCommand(ctx, "revert", fs, cf, args, 2, "SESSION TURN", env)
	if c == nil {
		return code
	}
	res, err := c.Revert(ctx, pos[0], pos[1])
	return printRevert(env, "revert", pos[0], res, err, *asJSON)
}

// Restore runs `metis restore SESSION CHECKPOINT [--json]`: put the
// files back as a checkpoint holds them (a revert's undo checkpoint
// undoes that revert).
func Restore(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("restore", env)
	asJSON := fs.Bool("json", false, "print the server's JSON answer")
	c, pos, code := checkpointCommand(ctx, "restore", fs, cf, args, 2, "SESSION CHECKPOINT", env)
	if c == nil {
		return code
	}
	res, err := c.RestoreCheckpoint(ctx, pos[0], pos[1])
	return printRevert(env, "restore", pos[0], res, err, *asJSON)
}

// Fork runs `metis fork SESSION [--message ID] [--checkpoint] [--json]`:
// a new session holding the conversation up to that message.
func Fork(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("fork", env)
	msg := fs.String("message", "", "the last message the fork holds (default: all of them)")
	ckpt := fs.Bool("checkpoint", false, "also put the workspace's files back as they were at that message")
	asJSON := fs.Bool("json", false, "print the server's JSON answer")
	c, pos, code := checkpointCommand(ctx, "fork", fs, cf, args, 1, "SESSION", env)
	if c == nil {
		return code
	}
	res, err := c.Fork(ctx, pos[0], client.ForkRequest{MessageID: *msg, Checkpoint: *ckpt})
	if err != nil {
		fmt.Fprintln(env.Stderr, "metis fork:", explain(err))
		return 1
	}
	if *asJSON {
		printJSON(env.Stdout, res)
		return 0
	}
	fmt.Fprintln(env.Stdout, res.ID)
	if res.Restored != nil {
		fmt.Fprintf(env.Stderr, "files put back: %d restored, %d removed (undo: metis restore %s %s)\n%s\n",
			len(res.Restored.Restored), len(res.Restored.Removed), res.ID, res.Restored.UndoCheckpointID, res.Restored.Warning)
	}
	if res.RestoreError != "" {
		fmt.Fprintln(env.Stderr, "metis fork:", res.RestoreError)
	}
	return 0
}

// checkpointCommand parses a command's flags and its n positional
// arguments, and connects. Refused, it returns a nil client and the
// exit code: 2 for a usage error, 1 when the server cannot be reached.
func checkpointCommand(ctx context.Context, name string, fs *flag.FlagSet, cf *common, args []string, n int, usage string, env Env) (*client.Client, []string, int) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, nil, 2
	}
	if len(pos) != n {
		fmt.Fprintf(env.Stderr, "usage: metis %s %s\n", name, usage)
		return nil, nil, 2
	}
	c, ok := cf.client(ctx, name, env)
	if !ok {
		return nil, nil, 1
	}
	return c, pos, 0
}

// printRevert prints what a revert or restore did, and how to undo it.
func printRevert(env Env, name, sid string, res client.RevertResult, err error, asJSON bool) int {
	if err != nil {
		fmt.Fprintln(env.Stderr, "metis "+name+":", explain(err))
		return 1
	}
	if asJSON {
		printJSON(env.Stdout, res)
		return 0
	}
	for _, p := range res.Restored {
		fmt.Fprintln(env.Stdout, "restored", p)
	}
	for _, p := range res.Removed {
		fmt.Fprintln(env.Stdout, "removed ", p)
	}
	for _, f := range res.Failed {
		fmt.Fprintf(env.Stdout, "FAILED   %s: %s\n", f.Path, f.Message)
	}
	fmt.Fprintf(env.Stderr, "undo: metis restore %s %s\n%s\n", sid, res.UndoCheckpointID, res.Warning)
	return 0
}
