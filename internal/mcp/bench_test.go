package mcp_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metis-agent/metis/internal/mcp"
)

// The overhead of an MCP call through metis against the SDK's own
// client calling the same server directly (docs/benchmarks.md): the
// fault server's echo over stdio, and server-everything's echo.
//
//	go test -run '^$' -bench MCPCall -benchtime 2000x -count 10 ./internal/mcp/

type benchServer struct {
	name  string
	cmd   func(b *testing.B) *exec.Cmd
	entry func(b *testing.B) string
	tool  string
	input string
}

func benchServers() []benchServer {
	return []benchServer{
		{name: "go", tool: "echo", input: `{"text": "hi"}`,
			cmd: func(b *testing.B) *exec.Cmd {
				exe, err := os.Executable()
				if err != nil {
					b.Fatal(err)
				}
				c := exec.Command(exe)
				c.Env = append(os.Environ(), serverEnv+"=tools")
				return c
			},
			entry: func(b *testing.B) string { return faultEntry(b, "bench", "tools") }},
		{name: "node", tool: "echo", input: `{"message": "hi"}`,
			cmd: func(b *testing.B) *exec.Cmd {
				return exec.Command("node", npmServer(b, "server-everything"), "stdio")
			},
			entry: func(b *testing.B) string { return everythingEntry(b, "bench") }},
	}
}

func BenchmarkMCPCallDirect(b *testing.B) {
	for _, s := range benchServers() {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			client := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}})
			session, err := client.Connect(ctx, &sdk.CommandTransport{Command: s.cmd(b), TerminateDuration: time.Second}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer session.Close()
			params := &sdk.CallToolParams{Name: s.tool, Arguments: rawArgs(s.input)}
			b.ResetTimer()
			for range b.N {
				if _, err := session.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMCPCallThroughMetis(b *testing.B) {
	for _, s := range benchServers() {
		b.Run(s.name, func(b *testing.B) {
			m, _ := newManager(b, s.entry(b))
			tools := toolsOf(b, m, "s1")
			tl := mustTool(b, tools, mcp.ToolName("bench", s.tool))
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if _, err := call(b, ctx, tl, s.input); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
