package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// New runs `metis new [DIR] [--model M] [--mode M] [--allow-home]
// [--json]`: create a session whose workspace is DIR (default the current
// directory) and print its id, for `metis send`, `metis tail`, the TUI's
// --session and the HTTP API.
func New(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("new", env)
	modelFlag := fs.String("model", "", "the session's model, provider:model (default the server's)")
	mode := fs.String("mode", "", "the permission mode: default, accept_edits, plan or auto (default the server's)")
	allowHome := fs.Bool("allow-home", false, "allow the workspace to be your home directory")
	asJSON := fs.Bool("json", false, "print the session summary as JSON")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) > 1 {
		fmt.Fprintln(env.Stderr, "usage: metis new [DIR] [--model M] [--mode M] [--allow-home] [--json]")
		return 2
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		fmt.Fprintln(env.Stderr, "metis new:", err)
		return 2
	}
	c, ok := cf.client(ctx, "new", env)
	if !ok {
		return 1
	}
	s, err := c.Create(ctx, client.CreateOptions{Workspace: abs, Model: *modelFlag, Mode: *mode, AllowHome: *allowHome})
	switch {
	case client.IsCode(err, protocol.CodeWorkspaceHome):
		fmt.Fprintf(env.Stderr, "metis new: %s is your home directory: the agent's tools could read and change every file in it; give a project directory, or --allow-home\n", abs)
		return 1
	case err != nil:
		fmt.Fprintln(env.Stderr, "metis new:", explain(err))
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
		return 0
	}
	fmt.Fprintln(env.Stdout, s.ID)
	fmt.Fprintf(env.Stderr, "session in %s on %s (mode %s): metis send %s \"hello\", metis tail %s, or metis --session %s\n",
		s.WorkspacePath, s.ActiveModel, s.Mode, s.ID, s.ID, s.ID)
	return 0
}
