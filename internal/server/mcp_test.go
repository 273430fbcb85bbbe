package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// MCP servers through the real server: config.yaml's mcp_servers, the
// builtin demo model calling their tools ("/tool NAME {json}"), the
// dispatcher's events, GET /mcp and a session's servers.

// everything returns the path of the npm reference server
// server-everything, or skips the test when node_modules lacks it.
func everything(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("node_modules has no @modelcontextprotocol/server-everything (run npm ci in the repository root): %v", err)
	}
	return p
}

// startWithMCP starts a server whose config.yaml has server-everything
// as the MCP server "everything".
func startWithMCP(t *testing.T) *servertest.Harness {
	t.Helper()
	home := t.TempDir()
	cfg := fmt.Sprintf("mcp_servers:\n  everything:\n    command: node\n    args: [%q, stdio]\n", everything(t))
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return servertest.Start(t, home)
}

func findEvent(evs []*event.Event, typ event.Type) (map[string]any, bool) {
	for _, e := range evs {
		if e.Type == typ {
			var m map[string]any
			_ = json.Unmarshal(e.Payload, &m)
			return m, true
		}
	}
	return nil, false
}

func TestMCPToolRunsThroughTheDispatcher(t *testing.T) {
	h := startWithMCP(t)
	sid := h.CreateSession()
	h.Submit(sid, `/tool mcp__everything__get-structured-content {"location": "New York"}`)
	h.WaitTurn(sid)
	evs := h.Live.Events(sid)
	started, _ := findEvent(evs, event.LLMCallStarted)
	if tools := fmt.Sprint(started["request"]); !strings.Contains(tools, "mcp__everything__echo") || !strings.Contains(tools, "read_file") {
		t.Fatalf("the tools offered: %s", tools)
	}
	called, ok := findEvent(evs, event.ToolCalled)
	if !ok || called["tool_name"] != "mcp__everything__get-structured-content" {
		t.Fatalf("tool.called: %v", called)
	}
	done, ok := findEvent(evs, event.ToolCompleted)
	if !ok {
		t.Fatalf("no tool.completed: %v", servertest.Types(evs))
	}
	sc, _ := done["structured_content"].(map[string]any)
	if sc["temperature"] == nil || done["structured_content_bytes"] == nil || !strings.Contains(fmt.Sprint(done["result"]), "temperature") {
		t.Fatalf("tool.completed: %v", done)
	}
	if end, _ := findEvent(evs, event.TurnCompleted); end["outcome"] != "completed" {
		t.Fatalf("turn: %v", end)
	}
	// The tool call row and the results message hold the result.
	var msgs struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type    string `json:"type"`
				Content string `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	h.Do("GET", "/sessions/"+sid+"/messages", nil, &msgs)
	found := false
	for _, m := range msgs.Messages {
		for _, b := range m.Content {
			found = found || (m.Role == "tool" && b.Type == "tool_result" && strings.Contains(b.Content, "temperature"))
		}
	}
	if !found {
		t.Fatalf("no tool result with the structured content's text in %+v", msgs.Messages)
	}
}

func TestMCPImagesAndErrorsInEvents(t *testing.T) {
	h := startWithMCP(t)
	sid := h.CreateSession()
	h.Submit(sid, `/tool mcp__everything__get-tiny-image {}`)
	h.WaitTurn(sid)
	done, ok := findEvent(h.Live.Events(sid), event.ToolCompleted)
	images, _ := done["images"].([]any)
	if !ok || len(images) != 1 {
		t.Fatalf("tool.completed: %v", done)
	}
	img := images[0].(map[string]any)
	if img["media_type"] != "image/png" || img["data"] == "" || img["bytes"].(float64) <= 0 {
		t.Fatalf("image: %v", img)
	}
	if !strings.Contains(fmt.Sprint(done["result"]), "[image 1: PNG ") {
		t.Fatalf("the result does not describe the image: %v", done["result"])
	}
	// The image reached the model (the demo says what it received, its
	// bytes whole), and the stored tool result refers to it, served once.
	var reply strings.Builder
	for _, e := range h.Live.Events(sid) {
		if e.Type == event.TextDelta {
			var d struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(e.Payload, &d)
			reply.WriteString(d.Text)
		}
	}
	if !strings.Contains(reply.String(), "The tool returned 1 image (PNG ") || strings.Contains(reply.String(), "bytes missing") {
		t.Fatalf("the model's reply %q: the image did not reach it whole", reply.String())
	}
	var msgs struct {
		Messages []struct {
			Content []struct {
				Type   string `json:"type"`
				Images []struct {
					SHA256    string `json:"sha256"`
					MediaType string `json:"media_type"`
				} `json:"images"`
			} `json:"content"`
		} `json:"messages"`
	}
	h.Do("GET", "/sessions/"+sid+"/messages", nil, &msgs)
	var sha string
	for _, m := range msgs.Messages {
		for _, b := range m.Content {
			if b.Type == "tool_result" && len(b.Images) == 1 && b.Images[0].MediaType == "image/png" {
				sha = b.Images[0].SHA256
			}
		}
	}
	resp, err := http.Get(h.URL + "/sessions/" + sid + "/images/" + sha)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if sha == "" || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("the stored tool result's image %q: GET %d %s", sha, resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	sid2 := h.CreateSession()
	h.Submit(sid2, `/tool mcp__everything__get-sum {"a": "not a number"}`)
	h.WaitTurn(sid2)
	failed, ok := findEvent(h.Live.Events(sid2), event.ToolFailed)
	if !ok || failed["tool_name"] != "mcp__everything__get-sum" || failed["started"] != true {
		t.Fatalf("tool.failed: %v", failed)
	}
	if c := failed["error_class"]; c != "execution_error" && c != "invalid_input" {
		t.Fatalf("error class %v", c)
	}
}

func TestCancelDuringAnMCPCall(t *testing.T) {
	h := startWithMCP(t)
	sid := h.CreateSession()
	turn := h.Submit(sid, `/tool mcp__everything__trigger-long-running-operation {"duration": 60, "steps": 60}`)
	servertest.WaitFor(t, "the MCP call to start", func() bool {
		_, ok := findEvent(h.Live.Events(sid), event.ToolCalled)
		return ok
	})
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if st := h.Do("POST", "/sessions/"+sid+"/turns/"+turn+"/cancel", map[string]string{"reason": "user"}, nil); st != http.StatusAccepted {
		t.Fatalf("cancel: %d", st)
	}
	h.WaitTurn(sid)
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the cancel took %s", took)
	}
	evs := h.Live.Events(sid)
	failed, _ := findEvent(evs, event.ToolFailed)
	if failed["error_class"] != "cancelled" || failed["started"] != true {
		t.Fatalf("tool.failed: %v", failed)
	}
	if c, _ := findEvent(evs, event.TurnCancelled); c["phase"] != "tools" {
		t.Fatalf("turn.cancelled: %v", c)
	}
	// The server is still there for the next turn.
	h.Submit(sid, `/tool mcp__everything__echo {"message": "still here"}`)
	h.WaitTurn(sid)
	var n int
	for _, e := range h.Live.Events(sid) {
		if e.Type == event.ToolCompleted && strings.Contains(string(e.Payload), "still here") {
			n++
		}
	}
	if n != 1 {
		t.Fatal("no echo after the cancelled call")
	}
}

func TestMCPEndpointsAndSessionServers(t *testing.T) {
	h := startWithMCP(t)
	var st protocol.MCPStatus
	if code := h.Do("GET", "/mcp", nil, &st); code != http.StatusOK || len(st.Servers) != 1 || st.Servers[0].State != protocol.MCPStateIdle {
		t.Fatalf("GET /mcp before any turn: %d %+v", code, st)
	}
	v := st.Version
	sid := h.CreateSession()
	// A session's own server (ACP's shape): another server-everything.
	body := protocol.MCPSessionServers{Servers: []protocol.MCPServerConfig{{Name: "editor one", Command: "node", Args: []string{everything(t), "stdio"}}}}
	var view protocol.MCPStatus
	if code := h.Do("PUT", "/sessions/"+sid+"/mcp_servers", body, &view); code != http.StatusOK || len(view.Servers) != 2 {
		t.Fatalf("PUT: %d %+v", code, view)
	}
	h.Submit(sid, `/tool mcp__editor_one__echo {"message": "from the editor's server"}`)
	h.WaitTurn(sid)
	done, ok := findEvent(h.Live.Events(sid), event.ToolCompleted)
	if !ok || !strings.Contains(fmt.Sprint(done["result"]), "from the editor's server") {
		t.Fatalf("the session's server: %v", servertest.Types(h.Live.Events(sid)))
	}
	// Long poll: answered once the version passed v.
	if code := h.Do("GET", "/mcp?after="+strconv.FormatUint(v, 10), nil, &st); code != http.StatusOK || st.Version <= v {
		t.Fatalf("GET /mcp?after: %d, version %d (after %d)", code, st.Version, v)
	}
	running := map[string]protocol.MCPServerStatus{}
	for _, s := range st.Servers {
		running[s.Name] = s
	}
	ed := running["editor_one"]
	if ed.State != protocol.MCPStateRunning || ed.Scope != protocol.MCPScopeSession || len(ed.SessionIDs) != 1 || ed.PID == 0 || len(ed.Tools) == 0 {
		t.Fatalf("the session's server in GET /mcp: %+v", ed)
	}
	// Another session does not have it.
	other := h.CreateSession()
	h.Submit(other, `/tool mcp__editor_one__echo {"message": "x"}`)
	h.WaitTurn(other)
	if f, _ := findEvent(h.Live.Events(other), event.ToolFailed); f["error_class"] != "not_found" {
		t.Fatalf("another session called the server: %v", f)
	}
	// Errors.
	var e protocol.HTTPError
	if code := h.Do("PUT", "/sessions/"+sid+"/mcp_servers", map[string]any{"servers": []map[string]string{{"name": "x"}}}, &e); code != http.StatusBadRequest || e.Error.Code != protocol.CodeInvalidMCPServers {
		t.Fatalf("a bad server: %d %+v", code, e)
	}
	if code := h.Do("PUT", "/sessions/sess_nope/mcp_servers", body, nil); code != http.StatusNotFound {
		t.Fatalf("an unknown session: %d", code)
	}
	if code := h.Do("GET", "/mcp?after=x", nil, nil); code != http.StatusBadRequest {
		t.Fatalf("a bad after: %d", code)
	}
	// DELETE clears; the server, used by no session, is stopped.
	if code := h.Do("DELETE", "/sessions/"+sid+"/mcp_servers", nil, &view); code != http.StatusOK || len(view.Servers) != 1 {
		t.Fatalf("DELETE: %d %+v", code, view)
	}
	servertest.WaitFor(t, "the editor's server to stop", func() bool { return !processAlive(strconv.Itoa(ed.PID)) })

	// The shutdown stops the configured server too.
	h.Do("GET", "/mcp", nil, &st)
	pid := st.Servers[0].PID
	if pid == 0 || !processAlive(strconv.Itoa(pid)) {
		t.Fatalf("the configured server: %+v", st.Servers[0])
	}
	h.Stop()
	if processAlive(strconv.Itoa(pid)) {
		t.Fatalf("server-everything (pid %d) outlived the server", pid)
	}
}
