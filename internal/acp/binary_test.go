package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/internal/servertest"
)

// The real binary: `metis acp --server URL` runs a whole turn for the
// SDK's client over its stdin and stdout, writes nothing but JSON-RPC
// messages to stdout, and exits 0 when stdin closes.
func TestRealBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	leakCheck(t)
	bin := filepath.Join(t.TempDir(), "metis")
	build := exec.Command("go", "build", "-o", bin, "github.com/metis-agent/metis/cmd/metis")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	h := servertest.Start(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "acp", "--server", h.URL)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Tee stdout: the SDK reads it, and every line is checked.
	pr, pw := io.Pipe()
	var mu sync.Mutex
	var bad []string
	lines := 0
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		defer pw.Close()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var m struct {
				JSONRPC string `json:"jsonrpc"`
			}
			mu.Lock()
			lines++
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.JSONRPC != "2.0" {
				bad = append(bad, sc.Text())
			}
			mu.Unlock()
			if _, err := pw.Write(append(sc.Bytes(), '\n')); err != nil {
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
		}
	}()
	ed := newEditor()
	conn := sdk.NewClientSideConnection(ed, stdin, pr)
	conn.SetLogger(testLogger())
	if _, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	ns, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: h.Workspace, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	resp, err := conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("hello")}})
	if err != nil || resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v", resp, err)
	}
	us := ed.all()
	if got, want := agentText(us), storedText(t, h.URL, string(ns.SessionId)); got != want || want == "" {
		t.Errorf("streamed %q, stored %q", got, want)
	}
	if len(toolCalls(us)) != 1 || thoughtText(us) == "" || count(us, func(u sdk.SessionUpdate) bool { return u.UsageUpdate != nil }) == 0 {
		t.Errorf("updates: %s", describe(us))
	}

	_ = stdin.Close()
	waited := make(chan error, 1)
	go func() { <-copied; waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("metis acp exited with %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(testTimeout):
		t.Fatal("metis acp did not exit after stdin closed")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 || lines == 0 {
		t.Errorf("stdout held %d lines, these not JSON-RPC: %q", lines, bad)
	}
	// The session is intact on the server.
	var s struct {
		ID string `json:"session_id"`
	}
	if st := h.Do("GET", "/sessions/"+string(ns.SessionId), nil, &s); st != 200 || s.ID != string(ns.SessionId) {
		t.Errorf("session after exit: %d %+v", st, s)
	}
}
