package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// FuzzRequestLine feeds one arbitrary line to a served agent (whose
// server is unreachable, so every handler fails fast), then a sentinel
// request: no input may crash the agent or stop it answering, every line
// it writes is one JSON-RPC message, and checkLine never forwards what
// is not a JSON object.
func FuzzRequestLine(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":"a","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"s","cwd":"/","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session/list","params":{"cursor":"x"}}`,
		`{"jsonrpc":"2.0","id":5,"result":{}}`, `{"jsonrpc":"2.0","id":1e999,"method":"x"}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"resource","resource":{"uri":"file:///a","text":"t"}}]}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\r",
		`{"jsonrpc":"2.0","id":8,"method":"session/new","params":null}`,
	} {
		f.Add(s)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := newTestClient(f, "http://127.0.0.1:1") // nothing listens on port 1
	served := make(chan struct{})
	go func() {
		defer close(served)
		defer outW.Close()
		Serve(context.Background(), c, "", inR, outW, discard())
	}()
	out := bufio.NewReader(outR)
	f.Cleanup(func() {
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, out) }()
		<-served
	})
	const sentinel = `{"jsonrpc":"2.0","id":"sentinel","method":"no/such"}`
	f.Fuzz(func(t *testing.T, line string) {
		v := checkLine([]byte(line))
		if v.forward {
			var m map[string]json.RawMessage
			if json.Unmarshal(bytes.TrimSpace([]byte(line)), &m) != nil {
				t.Fatalf("forwarded a line that is not a JSON object: %q", line)
			}
		}
		// One line only: the fuzzer's newlines would make several.
		line = strings.NewReplacer("\n", " ", "\r", " ").Replace(line)
		if _, err := io.WriteString(inW, line+"\n"+sentinel+"\n"); err != nil {
			t.Fatalf("the agent stopped reading: %v", err)
		}
		deadline := time.Now().Add(testTimeout)
		for time.Now().Before(deadline) {
			b, err := out.ReadBytes('\n')
			if err != nil {
				t.Fatalf("the agent stopped writing after %q: %v", line, err)
			}
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal(b, &m); err != nil || m.JSONRPC != "2.0" {
				t.Fatalf("wrote a line that is not a JSON-RPC message: %q", b)
			}
			if string(m.ID) == `"sentinel"` {
				return
			}
		}
		t.Fatalf("no answer to the sentinel after %q", line)
	})
}
