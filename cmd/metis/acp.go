package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/metis-agent/metis/internal/acp"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/server"
)

// runACP runs `metis acp`: the ACP agent on stdin/stdout.
func runACP(ctx context.Context, args []string) int {
	return acp.Run(ctx, args, os.Stdin, os.Stdout, os.Stderr, acp.Options{StartServer: startACPServer})
}

// startACPServer runs a metis server in this process for metis acp,
// configured as `metis serve` would be with args. It logs to
// <home>/acp-server.log: stdout belongs to the protocol.
func startACPServer(ctx context.Context, addr string, args []string) (func(), error) {
	cfg, err := config.Load(append(args, "--addr", addr))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return nil, err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	out := io.Discard
	if lf, err := os.OpenFile(filepath.Join(cfg.Home, "acp-server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		out = lf // closed with the process
	}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}))
	// The server's lifetime is the returned stop's, not ctx's.
	srv, err := server.New(context.WithoutCancel(ctx), cfg, log)
	if err != nil {
		return nil, err
	}
	if _, err := srv.Listen(); err != nil {
		_ = srv.Shutdown(context.Background())
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			fmt.Fprintln(os.Stderr, "metis acp: stopping the in-process server:", err)
		}
	}, nil
}
