package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/server"
)

// inProcess is a metis server running inside a client command (the TUI,
// metis acp) because none answered at the default address.
type inProcess struct {
	URL       string // its base URL
	TokenFile string // the token a client must send, "" when none is needed
	srv       *server.Server
}

// startInProcess runs a metis server in this process on addr, configured
// as `metis serve` would be with args (the commands pass --home and
// --demo-delay). It logs to <home>/<logName>: the terminal, or stdout,
// belongs to the command. The server's lifetime is stop's, not ctx's.
//
// This is the one place a client command starts a server: the commands'
// packages receive it as a function, so that they import neither the
// server nor its configuration.
func startInProcess(ctx context.Context, addr string, args []string, logName string) (*inProcess, error) {
	cfg, err := config.Load(append(args, "--addr", addr))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	out := io.Discard
	if lf, err := os.OpenFile(filepath.Join(cfg.Home, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		out = lf // closed with the process
	}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}))
	srv, err := server.New(context.WithoutCancel(ctx), cfg, log)
	if err != nil {
		return nil, err
	}
	url, err := srv.Listen()
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return nil, err
	}
	return &inProcess{URL: url, TokenFile: srv.TokenFile(), srv: srv}, nil
}

// stop shuts the server down within the 15 s `metis serve` allows
// itself, reporting a failure on stderr.
func (p *inProcess) stop(stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		fmt.Fprintln(stderr, "metis: stopping the in-process server:", err)
	}
}
