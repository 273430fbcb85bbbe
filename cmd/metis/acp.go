package main

import (
	"context"
	"os"

	"github.com/metis-agent/metis/internal/acp"
)

// runACP runs `metis acp`: the ACP agent on stdin/stdout.
func runACP(ctx context.Context, args []string) int {
	return acp.Run(ctx, args, os.Stdin, os.Stdout, os.Stderr, acp.Options{StartServer: startACPServer})
}

// startACPServer starts the in-process server of metis acp, logging to
// <home>/acp-server.log: stdout belongs to the protocol.
func startACPServer(ctx context.Context, addr string, args []string) (func(), error) {
	p, err := startInProcess(ctx, addr, args, "acp-server.log")
	if err != nil {
		return nil, err
	}
	return func() { p.stop(os.Stderr) }, nil
}
