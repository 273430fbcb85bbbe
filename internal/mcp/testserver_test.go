package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fault server: this test binary, re-executed with MCPTEST_SERVER
// set (TestMain), runs an MCP server of our own on the Go SDK over
// stdio, whose tools misbehave on request. MCPTEST_SERVER chooses:
//
//	tools       the tools below
//	badschema   the tools below, with malformed input schemas for some
//	noinit      reads stdin and never answers, not even initialize
//	exit        exits at once with status 7, after a line on stderr
const serverEnv = "MCPTEST_SERVER"

// runTestServer runs the server MCPTEST_SERVER names and exits.
func runTestServer(mode string) {
	switch mode {
	case "noinit":
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
		}
		os.Exit(0)
	case "exit":
		fmt.Fprintln(os.Stderr, "fault server: refusing to start")
		os.Exit(7)
	}
	s := newFaultServer(mode == "badschema")
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "fault server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type textIn struct {
	Text string `json:"text"`
}

type bigIn struct {
	Bytes int `json:"bytes"`
}

type hangIn struct {
	// Marker is a file the tool writes "cancelled" to once the call is
	// cancelled (by notifications/cancelled).
	Marker string `json:"marker,omitempty"`
}

type rendezvousIn struct {
	Dir string `json:"dir"`
	N   int    `json:"n"`
}

type sleepIn struct {
	MS int `json:"ms"`
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// newFaultServer builds the fault server. With badSchemas, tools/list
// answers with malformed input schemas for the tools named bad_*.
func newFaultServer(badSchemas bool) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "fault", Version: "1.0.0"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes text.\nSecond line.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "write.thing", Description: "Pretends to write."},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			return text("wrote " + in.Text), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exits in the middle of the call."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "fault server: crashing now")
			os.Exit(3)
			return nil, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "Never answers; notes its cancellation."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in hangIn) (*sdk.CallToolResult, any, error) {
			<-ctx.Done()
			if in.Marker != "" {
				_ = os.WriteFile(in.Marker, []byte("cancelled"), 0o600)
			}
			return nil, nil, ctx.Err()
		})
	sdk.AddTool(s, &sdk.Tool{Name: "sleep", Description: "Answers after ms milliseconds."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in sleepIn) (*sdk.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return text(fmt.Sprintf("slept %d ms", in.MS)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "rendezvous", Description: "Answers once n calls (of any server) are waiting in dir."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in rendezvousIn) (*sdk.CallToolResult, any, error) {
			_ = os.WriteFile(filepath.Join(in.Dir, strconv.Itoa(os.Getpid())), nil, 0o600)
			deadline := time.Now().Add(20 * time.Second)
			for {
				if entries, _ := os.ReadDir(in.Dir); len(entries) >= in.N {
					return text(fmt.Sprintf("met %d", len(entries))), nil, nil
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "nobody came"}}}, nil, nil
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	sdk.AddTool(s, &sdk.Tool{Name: "big", Description: "Answers with that many bytes of text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in bigIn) (*sdk.CallToolResult, any, error) {
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Reports an error (isError)."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "the thing is broken"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "picture", Description: "An image and structured content."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a dot:"},
				&sdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG fake")}},
				StructuredContent: map[string]any{"width": 1, "height": 1}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "env", Description: "Answers with the server's environment."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return text(strings.Join(os.Environ(), "\n")), nil, nil
		})
	var renameOnce sync.Once
	sdk.AddTool(s, &sdk.Tool{Name: "rename", Description: "Renames itself to renamed while it runs."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			renameOnce.Do(func() {
				s.RemoveTools("rename")
				s.AddTool(&sdk.Tool{Name: "renamed", Description: "The renamed tool.", InputSchema: json.RawMessage(`{"type":"object"}`)},
					func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
						return text("renamed ran"), nil
					})
			})
			time.Sleep(100 * time.Millisecond)
			return text("renamed myself"), nil, nil
		})
	if badSchemas {
		for _, n := range []string{"bad_string", "bad_type", "bad_props", "bad_required", "no_type"} {
			s.AddTool(&sdk.Tool{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text(n + " ran"), nil })
		}
		s.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
			return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
				res, err := next(ctx, method, req)
				if lr, ok := res.(*sdk.ListToolsResult); ok && err == nil {
					out := *lr
					out.Tools = nil
					for _, t := range lr.Tools {
						c := *t
						switch c.Name {
						case "bad_string":
							c.InputSchema = "not a schema"
						case "bad_type":
							c.InputSchema = map[string]any{"type": "string"}
						case "bad_props":
							c.InputSchema = map[string]any{"type": "object", "properties": 5}
						case "bad_required":
							c.InputSchema = map[string]any{"type": "object", "required": "x"}
						case "no_type":
							c.InputSchema = map[string]any{"properties": map[string]any{}}
						}
						out.Tools = append(out.Tools, &c)
					}
					return &out, nil
				}
				return res, err
			}
		})
	}
	return s
}
