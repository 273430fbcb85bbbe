// Command metis is the metis agent server and its command-line clients.
//
//	metis serve [flags]   run the server (see `metis serve -h`)
//
// The client commands (chat, new, tail, send, sessions) find the server with
// --server URL (default $METIS_SERVER, else the unix socket
// <home>/metis.sock when a server answers on it, else
// http://127.0.0.1:8421).
// When the TUI or `metis acp` finds no server at the default address,
// this command starts one in its own process (inprocess.go) and hands
// it to them as a function: the composition root is here and in
// internal/server, and the client packages import neither.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/sandbox"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/tool"
)

const usage = `metis: a local AI-agent server

usage:
  metis [chat] [--session ID | --continue] [--server URL]
                                            the terminal UI in the current directory (its workspace);
                                            starts a server in-process if none runs
  metis serve [flags]                       run the server; "metis serve -h" lists the flags
  metis serve --nats URL [--node NAME]      run as a node of a cluster sharing a NATS JetStream log
                                            (--nats-creds F for a credentials file; see docs/scale-out.md)
  metis new [DIR] [--model M] [--mode M]    create a session whose workspace is DIR (default the current
                                            directory) and print its id
  metis sessions [--json]                   list sessions, with their last activity
  metis send SESSION "text"                 run a turn and print its answer as it streams; tool calls that
                                            need approval ask on the terminal (--approve-all / --deny-all
                                            for scripts; without a terminal they are denied); ctrl-c
                                            cancels the turn
  metis tail SESSION [--filter F] [--since ID] [--json | --events] [--workers]
                                            follow a session live as a chat (--events: one line per
                                            event, --json: the event envelopes), with reconnect
  metis turns SESSION [--json]              a session's turns: what files each changed, which can be reverted
  metis revert SESSION TURN [--json]        put the workspace's files back as they were before that turn
                                            (prints the undo; what commands did outside the files stays)
  metis restore SESSION CHECKPOINT          put the files back as a checkpoint holds them (undoes a revert)
  metis fork SESSION [--message ID] [--checkpoint] [--json]
                                            a new session with the conversation up to that message
  metis cluster status [--json]             a cluster's nodes, tree leases and projection lag
                                            (asks the server; see docs/scale-out.md)
  metis mcp list [--tools] [--json] [--session ID]
                                            the MCP servers: state, tools, last error (docs/mcp.md)
  metis acp [--model M] [--log-file F]      an Agent Client Protocol agent on stdio, for editors
                                            (starts a server in-process if none runs; see docs/editors.md)
  metis tool-output SESSION TOOL_USE_ID [--since ID]
                                            print a shell call's live output, exit with its exit code
                                            (what metis acp shows in an editor's terminal)

client commands take --server URL (http(s)://host:port or unix:///path/metis.sock; default
$METIS_SERVER, else the socket <home>/metis.sock when a server answers on it, else
http://127.0.0.1:8421) and --token-file F (default $METIS_TOKEN, else <home>/token, sent only
to the server running on that home, over https or its unix socket)
`

func main() {
	// First of all, before anything reads the environment: hide the
	// keys from /proc/<pid>/environ and close this process's memory to
	// the tools (internal/sandbox, docs/sandbox.md). It re-execs the
	// binary once when the environment holds more than a tool may see.
	if err := sandbox.Shield(visibleEnviron); err != nil {
		fmt.Fprintln(os.Stderr, "metis: warning:", err)
	}
	os.Exit(run(os.Args[1:]))
}

// visibleEnviron is what may stay in this process's initial
// environment: the variables every tool process gets anyway.
func visibleEnviron(environ []string) []string { return tool.ToolEnviron(environ, nil) }

func run(args []string) int {
	env := cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin}
	if len(args) == 0 || (strings.HasPrefix(args[0], "-") && !isHelp(args[0])) {
		return runChat(args, env)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "chat":
		return runChat(args[1:], env)
	case "serve":
		return serve(args[1:])
	case "sessions":
		return cli.Sessions(ctx, args[1:], env)
	case "new":
		return cli.New(ctx, args[1:], env)
	case "send":
		return cli.Send(ctx, args[1:], env)
	case "tail":
		return cli.Tail(ctx, args[1:], env)
	case "turns":
		return cli.Turns(ctx, args[1:], env)
	case "revert":
		return cli.Revert(ctx, args[1:], env)
	case "restore":
		return cli.Restore(ctx, args[1:], env)
	case "fork":
		return cli.Fork(ctx, args[1:], env)
	case "cluster":
		return cli.Cluster(ctx, args[1:], env)
	case "mcp":
		return cli.MCP(ctx, args[1:], env)
	case "acp":
		return runACP(ctx, args[1:])
	case "tool-output":
		return cli.ToolOutput(ctx, args[1:], env)
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "metis: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func serve(args []string) int {
	cfg, err := config.Load(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "metis serve:", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "metis serve: log-level:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal starts the shutdown (bounded, 15 s); a second one
	// ends the process at once.
	go func() { <-ctx.Done(); stop() }()
	srv, err := server.New(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "metis serve:", err)
		return 1
	}
	if err := srv.Run(ctx, os.Stdout); err != nil {
		// A listen error (the address in use, a live unix socket) or a
		// shutdown that did not finish.
		fmt.Fprintln(os.Stderr, "metis serve:", err)
		return 1
	}
	return 0
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }
