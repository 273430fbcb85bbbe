package acp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metis-agent/metis/internal/servertest"
)

// greeter is an MCP server over streamable HTTP with one tool, whose
// requests must carry the editor's header.
func greeter(t *testing.T) string {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "greeter", Version: "1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "greet", Description: "Greets."},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "hello from the editor's server"}}}, nil, nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Editor") != "zed" {
			http.Error(w, "no editor header", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		ts.Close()
	})
	return ts.URL + "/mcp"
}

func TestInitializeOffersStdioAndHTTPMCPServers(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s := serveAgent(t, h.URL)
	caps := s.initialize(t).AgentCapabilities.McpCapabilities
	if !caps.Http || caps.Sse || caps.Acp {
		t.Fatalf("mcpCapabilities: %+v", caps)
	}
}

func TestSessionNewMCPServersServeThatSession(t *testing.T) {
	leakCheck(t)
	url := greeter(t) // closed after the server (cleanups run last first)
	h := servertest.Start(t, "")
	s := serveAgent(t, h.URL)
	s.initialize(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	r, err := s.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: h.Workspace, McpServers: []sdk.McpServer{
		{Http: &sdk.McpServerHttpInline{Type: "http", Name: "Greeter", Url: url, Headers: []sdk.HttpHeader{{Name: "X-Editor", Value: "zed"}}}},
		{Sse: &sdk.McpServerSseInline{Type: "sse", Name: "old", Url: url}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sid := string(r.SessionId)
	if _, err := s.prompt(ctx, sid, `/tool mcp__Greeter__greet {}`); err != nil {
		t.Fatal(err)
	}
	s.ed.waitFor(t, "the MCP tool's result", func(us []sdk.SessionUpdate) bool {
		for _, tc := range toolCalls(us) {
			if toolStatus(us, string(tc.ToolCallId)) == sdk.ToolCallStatusCompleted {
				return true
			}
		}
		return false
	})
	if got := describe(s.ed.all()); !strings.Contains(got, "hello from the editor's server") && !strings.Contains(agentText(s.ed.all()), "hello from the editor's server") {
		t.Fatalf("updates: %s", got)
	}
	// Another session (created without servers) does not have it.
	other := s.newSession(t, h.Workspace)
	c := newTestClient(t, h.URL)
	st, err := c.SessionMCP(ctx, other)
	if err != nil || len(st.Servers) != 0 {
		t.Fatalf("the other session's servers: %+v, %v", st.Servers, err)
	}
	st, err = c.SessionMCP(ctx, sid)
	if err != nil || len(st.Servers) != 1 || st.Servers[0].Name != "Greeter" {
		t.Fatalf("the session's servers: %+v, %v", st.Servers, err)
	}
	// The editor goes: the agent clears the servers it set.
	s.close(t)
	st, err = c.SessionMCP(ctx, sid)
	if err != nil || len(st.Servers) != 0 {
		t.Fatalf("after the agent stopped: %+v, %v", st.Servers, err)
	}
}

func TestSessionLoadReplacesAndBadServersAreRefused(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s := serveAgent(t, h.URL)
	s.initialize(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err := s.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: h.Workspace, McpServers: []sdk.McpServer{
		{Stdio: &sdk.McpServerStdio{Name: "x", Command: "node", Env: []sdk.EnvVariable{{Name: "NOT A NAME", Value: "v"}}}}}})
	var re *sdk.RequestError
	if err == nil || !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Message, "environment variable") {
		t.Fatalf("a bad server: %v", err)
	}
	sid := s.newSession(t, h.Workspace)
	if _, err := s.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace, McpServers: []sdk.McpServer{
		{Stdio: &sdk.McpServerStdio{Name: "tools", Command: "/bin/true", Args: []string{}, Env: []sdk.EnvVariable{}}}}}); err != nil {
		t.Fatal(err)
	}
	st, err := newTestClient(t, h.URL).SessionMCP(ctx, sid)
	if err != nil || len(st.Servers) != 1 || st.Servers[0].Command != "/bin/true" {
		t.Fatalf("after session/load: %+v, %v", st.Servers, err)
	}
	// A resume without mcpServers keeps them; a load with none clears.
	if _, err := s.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace}); err != nil {
		t.Fatal(err)
	}
	if st, _ := newTestClient(t, h.URL).SessionMCP(ctx, sid); len(st.Servers) != 1 {
		t.Fatalf("after session/resume: %+v", st.Servers)
	}
	if _, err := s.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := newTestClient(t, h.URL).SessionMCP(ctx, sid); len(st.Servers) != 0 {
		t.Fatalf("after a load without servers: %+v", st.Servers)
	}
}

func TestMCPServersOfEveryTransport(t *testing.T) {
	out, skipped := mcpServers([]sdk.McpServer{
		{Stdio: &sdk.McpServerStdio{Name: "fs", Command: "npx", Args: []string{"-y", "x"}, Env: []sdk.EnvVariable{{Name: "A", Value: "1"}}}},
		{Http: &sdk.McpServerHttpInline{Name: "gh", Url: "https://h/mcp", Headers: []sdk.HttpHeader{{Name: "Authorization", Value: "Bearer t"}}}},
		{Sse: &sdk.McpServerSseInline{Name: "old", Url: "https://h/sse"}},
		{Acp: &sdk.McpServerAcpInline{Name: "inline", Id: "c1"}},
	}, "/ws")
	if len(out) != 2 || out[0].Cwd != "/ws" || out[0].Env["A"] != "1" || out[1].Headers["Authorization"] != "Bearer t" || out[1].Cwd != "" {
		t.Fatalf("servers: %+v", out)
	}
	if strings.Join(skipped, ",") != "old (sse),inline (acp)" {
		t.Fatalf("skipped: %v", skipped)
	}
}
