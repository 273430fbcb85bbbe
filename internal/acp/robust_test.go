package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// rawAgent serves the agent on pipes driven with raw lines.
type rawAgent struct {
	in     *io.PipeWriter
	out    *bufio.Reader
	served chan struct{}
}

func serveRaw(t *testing.T, url string) *rawAgent {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := newTestClient(t, url)
	r := &rawAgent{in: inW, out: bufio.NewReader(outR), served: make(chan struct{})}
	go func() {
		defer close(r.served)
		defer outW.Close()
		Serve(context.Background(), c, "", inR, outW, testLogger())
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, r.out) }()
		<-r.served
	})
	return r
}

// roundTrip writes a line and reads the one answer.
func (r *rawAgent) roundTrip(t *testing.T, line string) map[string]any {
	t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		t.Fatalf("write %q: %v", line, err)
	}
	type res struct {
		m   map[string]any
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := r.out.ReadBytes('\n')
		var m map[string]any
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		ch <- res{m, err}
	}()
	select {
	case x := <-ch:
		if x.err != nil {
			t.Fatalf("answer to %q: %v", line, x.err)
		}
		return x.m
	case <-time.After(testTimeout):
		t.Fatalf("no answer to %q", line)
	}
	return nil
}

func errCode(m map[string]any) int {
	e, ok := m["error"].(map[string]any)
	if !ok {
		return 0
	}
	c, _ := e["code"].(float64)
	return int(c)
}

// Malformed or unknown input gets a JSON-RPC error, and the agent keeps
// serving.
func TestMalformedInput(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	r := serveRaw(t, h.URL)
	cases := []struct {
		line string
		code int
		id   any
	}{
		{`this is not json`, codeParseError, nil},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize"`, codeParseError, nil},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, codeInvalidRequest, nil},
		{`42`, codeInvalidRequest, nil},
		{`{"jsonrpc":"2.0","id":2}`, codeInvalidRequest, float64(2)},
		{`{"jsonrpc":"1.0","id":3,"method":"initialize","params":{}}`, codeInvalidRequest, float64(3)},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"initialize"}`, codeInvalidRequest, nil},
		{`{"jsonrpc":"2.0","id":4,"method":7}`, codeInvalidRequest, float64(4)},
		{`{"jsonrpc":"2.0","id":5,"method":"no/such_method","params":{}}`, -32601, float64(5)},
		{`{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"one"}}`, -32602, float64(6)},
		{`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"sess_nope","prompt":[{"type":"text","text":"hi"}]}}`, codeResourceNotFound, float64(7)},
		{`{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"sess_nope","prompt":[{"type":"audio","data":"AA==","mimeType":"audio/wav"}]}}`, -32602, float64(8)},
		{`{"jsonrpc":"2.0","id":9,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}`, -32602, float64(9)},
		{`{"jsonrpc":"2.0","id":10,"method":"session/new","params":{"cwd":"/no/such/dir","mcpServers":[]}}`, -32602, float64(10)},
		{`{"jsonrpc":"2.0","id":11,"method":"session/set_mode","params":{"sessionId":"s","modeId":"m"}}`, -32602, float64(11)},
		{`{"jsonrpc":"2.0","id":13,"method":"session/set_mode","params":{"sessionId":"sess_nope","modeId":"plan"}}`, codeResourceNotFound, float64(13)},
		{`{"jsonrpc":"2.0","id":14,"method":"session/set_config_option","params":{"sessionId":"sess_nope","configId":"colour","value":"x"}}`, -32602, float64(14)},
		{`{"jsonrpc":"2.0","id":15,"method":"session/set_config_option","params":{"sessionId":"sess_nope","configId":"model","value":"x"}}`, codeResourceNotFound, float64(15)},
	}
	for _, tc := range cases {
		m := r.roundTrip(t, tc.line)
		if got := errCode(m); got != tc.code || m["id"] != tc.id {
			t.Errorf("%s\n  answered %v, want code %d id %v", tc.line, m, tc.code, tc.id)
		}
	}
	// A line longer than the limit is refused whole, then service goes on.
	long := `{"jsonrpc":"2.0","id":12,"method":"initialize","params":{"x":"` + strings.Repeat("a", maxLine) + `"}}`
	if m := r.roundTrip(t, long); errCode(m) != codeInvalidRequest {
		t.Errorf("long line answered %v", m)
	}
	m := r.roundTrip(t, `{"jsonrpc":"2.0","id":"last","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	if m["id"] != "last" || m["result"] == nil {
		t.Fatalf("initialize after the bad lines: %v", m)
	}
}

// The editor closing stdin ends the agent promptly, even mid-turn, and
// leaves the session and its turn running on the server.
func TestStdinEOFMidTurn(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "", func(c *config.Config) { c.DemoDelay = 20 * time.Millisecond })
	s := serveAgent(t, h.URL)
	s.initialize(t)
	sid := s.newSession(t, h.Workspace)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.prompt(ctx, sid, "/long 60")
		done <- err
	}()
	s.ed.waitFor(t, "a few chunks", func(us []sdk.SessionUpdate) bool {
		return count(us, func(u sdk.SessionUpdate) bool { return u.AgentMessageChunk != nil }) >= 3
	})
	s.close(t)
	if err := <-done; err == nil {
		t.Error("the prompt answered although the agent's output is gone")
	}
	// The turn goes on and completes on the server.
	h.WaitTurn(sid)
	if got := storedText(t, h.URL, sid); !strings.HasSuffix(got, "Sentence 60 of 60. ") {
		t.Errorf("stored answer %q", got)
	}
}

// The metis server restarts mid-turn: the agent resumes the stream on
// the new server with its cursor, and the editor's text is exactly the
// stored (partial) answer: no chunk missing, none twice. The turn was
// cancelled by the shutdown, so the prompt answers cancelled.
func TestServerRestartMidTurn(t *testing.T) {
	leakCheck(t)
	home := t.TempDir()
	slow := func(c *config.Config) { c.DemoDelay = 15 * time.Millisecond }
	h1 := servertest.Start(t, home, slow)
	addr := strings.TrimPrefix(h1.URL, "http://")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatal(err)
	}
	s := serveAgent(t, h1.URL)
	s.initialize(t)
	sid := s.newSession(t, h1.Workspace)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := s.promptAsync(ctx, sid, "/long 400")
	s.ed.waitFor(t, "some chunks", func(us []sdk.SessionUpdate) bool {
		return count(us, func(u sdk.SessionUpdate) bool { return u.AgentMessageChunk != nil }) >= 20
	})
	h1.Stop()
	h2 := servertest.Start(t, home, slow, func(c *config.Config) { c.Addr = addr })
	a := <-done
	if a.err != nil || a.r.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("prompt answered %+v, %v", a.r, a.err)
	}
	got, want := agentText(s.ed.all()), storedText(t, h2.URL, sid)
	if got != want || !strings.HasPrefix(want, "Sentence 1 of 400. Sentence 2 of 400.") {
		t.Errorf("editor text (%d bytes) differs from the stored answer (%d bytes)\n got %q\nwant %q", len(got), len(want), clip(got, 300), clip(want, 300))
	}
}
