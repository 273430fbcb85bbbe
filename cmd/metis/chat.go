package main

import (
	"context"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/tui"
)

// runChat runs the terminal UI. It handles ctrl-c itself (cancel, then
// quit), so it gets no signal context.
func runChat(args []string, env cli.Env) int {
	return tui.Run(context.Background(), args, env, tui.Options{StartServer: startChatServer(env)})
}

// startChatServer starts the in-process server of the TUI, logging to
// <home>/tui-server.log: the terminal belongs to the TUI.
func startChatServer(env cli.Env) func(ctx context.Context, addr string, args []string) (tui.Started, error) {
	return func(ctx context.Context, addr string, args []string) (tui.Started, error) {
		p, err := startInProcess(ctx, addr, args, "tui-server.log")
		if err != nil {
			return tui.Started{}, err
		}
		return tui.Started{URL: p.URL, TokenFile: p.TokenFile, Stop: func() { p.stop(env.Stderr) }}, nil
	}
}
