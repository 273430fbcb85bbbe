package server

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/mcp"
	"github.com/metis-agent/metis/internal/store"
)

// newMCP returns the MCP servers' manager (docs/mcp.md): config.yaml's
// mcp_servers, read now and watched (Server.New starts the watch), with
// the tools' environment; a worker's turns use the servers set for its
// planner.
func newMCP(cfg config.Config, st *store.Store, log *slog.Logger) *mcp.Manager {
	return mcp.New(mcp.Options{
		ConfigPath: filepath.Join(cfg.Home, "config.yaml"),
		ToolEnv:    cfg.ToolEnv,
		Logger:     log,
		Parent: func(ctx context.Context, id string) string {
			s, err := st.Session(ctx, id)
			if err != nil {
				return ""
			}
			return s.ParentSessionID
		},
	})
}
