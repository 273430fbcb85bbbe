// Command protocapture drives a running metis server (builtin:demo) over
// HTTP and WebSocket and prints every request, response and frame as
// JSON lines. docs/protocol.md's worked example was captured with it:
//
//	go build -o bin/metis ./cmd/metis
//	bin/metis serve --addr 127.0.0.1:18421 --home "$(mktemp -d)" &
//	go run ./scripts/protocapture -server http://127.0.0.1:18421 -workspace "$(mktemp -d)"
//
// It is a documentation tool, not part of the server or its tests.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/protocol"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:18421", "metis server URL")
	ws := flag.String("workspace", "", "an existing directory for the session's workspace")
	refusals := flag.Bool("refusals", false, "capture the stream's refusals (bad cursors, filters and frames, the subscribe timeout) instead")
	workers := flag.Bool("workers", false, "capture a delegation and cancellations during tools (catalog events only) instead")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	do := run
	switch {
	case *refusals:
		do = runRefusals
	case *workers:
		do = runWorkers
	}
	if err := do(ctx, *server, *ws); err != nil {
		fmt.Fprintln(os.Stderr, "protocapture:", err)
		os.Exit(1)
	}
}

func call(ctx context.Context, server, method, path string, body any) (map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
		fmt.Printf(">>> %s %s %s\n", method, path, b)
	} else {
		fmt.Printf(">>> %s %s\n", method, path)
	}
	req, err := http.NewRequestWithContext(ctx, method, server+path, rd)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("<<< %d %s", resp.StatusCode, b)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out, nil
}

type stream struct {
	c   *websocket.Conn
	tag string
}

func dial(ctx context.Context, server, sid, tag string) (*stream, error) {
	info, err := call(ctx, server, "GET", "/sessions/"+sid, nil)
	if err != nil {
		return nil, err
	}
	u, _ := info["ws_url"].(string)
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	c.SetReadLimit(8 << 20)
	return &stream{c: c, tag: tag}, nil
}

func (s *stream) send(ctx context.Context, v any) error {
	b, _ := json.Marshal(v)
	fmt.Printf("%s C> %s\n", s.tag, b)
	return s.c.Write(ctx, websocket.MessageText, b)
}

// until prints frames until one satisfies stop; it returns that frame.
func (s *stream) until(ctx context.Context, stop func(map[string]any) bool) (map[string]any, error) {
	for {
		_, b, err := s.c.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		fmt.Printf("%s S> %s\n", s.tag, b)
		var f map[string]any
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("frame: %w", err)
		}
		if stop(f) {
			return f, nil
		}
	}
}

func evType(f map[string]any) protocol.EventType {
	if e, ok := f["event"].(map[string]any); ok {
		t, _ := e["type"].(string)
		return protocol.EventType(t)
	}
	return ""
}

func isType(t string) func(map[string]any) bool {
	return func(f map[string]any) bool { return f["type"] == t }
}

func isEvent(ts ...protocol.EventType) func(map[string]any) bool {
	return func(f map[string]any) bool {
		for _, t := range ts {
			if evType(f) == t {
				return true
			}
		}
		return false
	}
}

func run(ctx context.Context, server, workspace string) error {
	fmt.Println("## 1. create a session")
	s, err := call(ctx, server, "POST", "/sessions", map[string]any{"workspace_path": workspace})
	if err != nil {
		return err
	}
	sid, _ := s["id"].(string)

	fmt.Println("## 2. attach, subscribe with a snapshot")
	a, err := dial(ctx, server, sid, "A")
	if err != nil {
		return err
	}
	defer a.c.CloseNow()
	_ = a.send(ctx, map[string]any{"type": protocol.TypeSubscribe, "filter": "preset:chat", "since": nil, "snapshot": true})
	if _, err := a.until(ctx, isType(protocol.TypeSnapshot)); err != nil {
		return err
	}
	_ = a.send(ctx, map[string]any{"type": protocol.TypePing, "nonce": "c-1"})
	if _, err := a.until(ctx, isType(protocol.TypePong)); err != nil {
		return err
	}

	fmt.Println("## 3. a turn")
	t, err := call(ctx, server, "POST", "/sessions/"+sid+"/turns", map[string]any{"content": "hello"})
	if err != nil {
		return err
	}
	turn, _ := t["turn_id"].(string)
	_, _ = call(ctx, server, "POST", "/sessions/"+sid+"/turns", map[string]any{"content": "again"})
	var cursor string
	if _, err := a.until(ctx, func(f map[string]any) bool {
		if evType(f) == protocol.EventLLMCallStarted && cursor == "" {
			cursor, _ = f["event"].(map[string]any)["id"].(string)
		}
		return isEvent(protocol.EventTurnCompleted, protocol.EventTurnCancelled)(f)
	}); err != nil {
		return err
	}

	fmt.Println("## 4. history, feedback")
	_, _ = call(ctx, server, "GET", "/sessions/"+sid+"/messages?limit=2", nil)
	_, _ = call(ctx, server, "POST", "/sessions/"+sid+"/turns/"+turn+"/feedback", map[string]any{"rating": "up", "comment": "nice"})

	fmt.Println("## 5. a second client: bad filter, then a replay from a cursor, catalog types only")
	b, err := dial(ctx, server, sid, "B")
	if err != nil {
		return err
	}
	defer b.c.CloseNow()
	_ = b.send(ctx, map[string]any{"type": protocol.TypeSubscribe, "filter": map[string]any{"event_types": []string{string(protocol.EventTextDelta), "txt.delta"}}})
	if _, err := b.until(ctx, isType(protocol.TypeSubscribeError)); err != nil {
		return err
	}
	_ = b.send(ctx, map[string]any{"type": protocol.TypeSubscribe, "filter": map[string]any{"event_types": []string{string(protocol.EventToolCalled), string(protocol.EventToolCompleted), string(protocol.EventTurnCompleted), string(protocol.EventFeedbackSubmitted)}}, "since": cursor})
	ack, err := b.until(ctx, isType(protocol.TypeSubscribeAck))
	if err != nil {
		return err
	}
	n, _ := ack["replay_event_count"].(float64)
	for i := 0; i < int(n); i++ {
		if _, err := b.until(ctx, func(map[string]any) bool { return true }); err != nil {
			return err
		}
	}
	_ = b.send(ctx, map[string]any{"type": protocol.TypeSubscribe, "filter": nil})
	if _, err := b.until(ctx, isType(protocol.TypeError)); err != nil {
		return err
	}
	_ = b.send(ctx, map[string]any{"type": "hello"})
	if _, err := b.until(ctx, isType(protocol.TypeError)); err != nil {
		return err
	}

	fmt.Println("## 6. cancel while the model streams")
	t2, err := call(ctx, server, "POST", "/sessions/"+sid+"/turns", map[string]any{"content": "tell me more"})
	if err != nil {
		return err
	}
	turn2, _ := t2["turn_id"].(string)
	if _, err := a.until(ctx, isEvent(protocol.EventTextDelta)); err != nil {
		return err
	}
	_ = a.send(ctx, map[string]any{"type": protocol.TypeCancel, "turn_id": turn2, "reason": "user_cancel"})
	if _, err := a.until(ctx, isEvent(protocol.EventTurnCancelled, protocol.EventTurnCompleted)); err != nil {
		return err
	}
	_, _ = call(ctx, server, "POST", "/sessions/"+sid+"/turns/"+turn2+"/cancel", map[string]any{})
	_ = a.send(ctx, map[string]any{"type": protocol.TypeCancel, "turn_id": "turn_nope"})
	if _, err := a.until(ctx, isType(protocol.TypeError)); err != nil {
		return err
	}

	fmt.Println("## 7. errors")
	_, _ = call(ctx, server, "GET", "/sessions/sess_nope", nil)
	_, _ = call(ctx, server, "GET", "/sessions?limit=1", nil)
	_ = a.c.Close(websocket.StatusNormalClosure, "")
	_ = b.c.Close(websocket.StatusNormalClosure, "")
	return nil
}

// runRefusals shows how the stream refuses bad input: each subscribe
// below is refused and the connection stays open, until the last
// connection, which never subscribes and is closed after 10 s.
func runRefusals(ctx context.Context, server, workspace string) error {
	s, err := call(ctx, server, "POST", "/sessions", map[string]any{"workspace_path": workspace})
	if err != nil {
		return err
	}
	sid, _ := s["id"].(string)
	a, err := dial(ctx, server, sid, "A")
	if err != nil {
		return err
	}
	defer a.c.CloseNow()
	for _, sub := range []map[string]any{
		{"type": protocol.TypeSubscribe, "since": "evt_nope"},
		{"type": protocol.TypeSubscribe, "since": "evt_7ZZZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"type": protocol.TypeSubscribe, "since": "evt_01AAAAAAAAAAAAAAAAAAAAAAAA"},
		{"type": protocol.TypeSubscribe, "filter": "preset:everything"},
		{"type": protocol.TypeSubscribe, "filter": map[string]any{"event_types": []string{}}},
		{"type": protocol.TypeSubscribe, "filter": map[string]any{"actors": []string{}}},
	} {
		_ = a.send(ctx, sub)
		if _, err := a.until(ctx, isType(protocol.TypeSubscribeError)); err != nil {
			return err
		}
	}
	for _, raw := range []string{`{"type":"subscribe"`, `[1]`, `{"type":"cancel"}`, `{"type":"subscribe","snapshot":"yes"}`, `{"type":"ping","nonce":7}`} {
		fmt.Printf("A C> %s\n", raw)
		_ = a.c.Write(ctx, websocket.MessageText, []byte(raw))
		if _, err := a.until(ctx, isType(protocol.TypeError)); err != nil {
			return err
		}
	}
	fmt.Println("A C> (a binary frame)")
	_ = a.c.Write(ctx, websocket.MessageBinary, []byte(`{"type":"ping"}`))
	if _, err := a.until(ctx, isType(protocol.TypeError)); err != nil {
		return err
	}
	_ = a.send(ctx, map[string]any{"type": protocol.TypeSubscribe, "filter": "preset:full", "snapshot": true})
	if _, err := a.until(ctx, isType(protocol.TypeSnapshot)); err != nil {
		return err
	}
	b, err := dial(ctx, server, sid, "B")
	if err != nil {
		return err
	}
	defer b.c.CloseNow()
	fmt.Println("B (sends nothing)")
	_, err = b.until(ctx, func(map[string]any) bool { return false })
	fmt.Printf("B closed: code %d, reason %s\n", websocket.CloseStatus(err), closeReason(err))
	return nil
}

func closeReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return fmt.Sprint(err)
}

// runWorkers follows a planner with include_worker_sessions (catalog
// events only, to keep it short) through a delegation, a cancel while a
// tool runs, and a cancel while a worker runs; then a snapshot shows the
// workers.
func runWorkers(ctx context.Context, server, workspace string) error {
	s, err := call(ctx, server, "POST", "/sessions", map[string]any{"workspace_path": workspace})
	if err != nil {
		return err
	}
	sid, _ := s["id"].(string)
	a, err := dial(ctx, server, sid, "A")
	if err != nil {
		return err
	}
	defer a.c.CloseNow()
	types := []string{string(protocol.EventTurnStarted), string(protocol.EventTurnCompleted), string(protocol.EventTurnCancelled), string(protocol.EventLLMCallFailed), string(protocol.EventToolCalled),
		string(protocol.EventToolCompleted), string(protocol.EventToolFailed), string(protocol.EventDelegateStarted), string(protocol.EventDelegateCompleted), string(protocol.EventDelegateFailed)}
	_ = a.send(ctx, map[string]any{"type": protocol.TypeSubscribe, "filter": map[string]any{"event_types": types, "include_worker_sessions": true}})
	if _, err := a.until(ctx, isType(protocol.TypeSubscribeAck)); err != nil {
		return err
	}
	plannerEnd := func(f map[string]any) bool {
		e, _ := f["event"].(map[string]any)
		return e != nil && e["session_id"] == sid && isEvent(protocol.EventTurnCompleted, protocol.EventTurnCancelled)(f)
	}
	turn := func(content string) (string, error) {
		t, err := call(ctx, server, "POST", "/sessions/"+sid+"/turns", map[string]any{"content": content})
		if err != nil {
			return "", err
		}
		id, _ := t["turn_id"].(string)
		return id, nil
	}

	fmt.Println("## a delegation")
	if _, err := turn(`/tool delegate {"task": "/echo hello from the worker"}`); err != nil {
		return err
	}
	if _, err := a.until(ctx, plannerEnd); err != nil {
		return err
	}

	fmt.Println("## cancel while a tool runs")
	id, err := turn(`/tool shell {"command": "sleep 30"}`)
	if err != nil {
		return err
	}
	if _, err := a.until(ctx, isEvent(protocol.EventToolCalled)); err != nil {
		return err
	}
	_ = a.send(ctx, map[string]any{"type": protocol.TypeCancel, "turn_id": id})
	if _, err := a.until(ctx, plannerEnd); err != nil {
		return err
	}

	fmt.Println("## cancel the planner while its worker runs a tool")
	id, err = turn(`/tool delegate {"task": "/tool shell {\"command\": \"sleep 30\"}"}`)
	if err != nil {
		return err
	}
	if _, err := a.until(ctx, func(f map[string]any) bool {
		e, _ := f["event"].(map[string]any)
		return e != nil && e["session_id"] != sid && evType(f) == protocol.EventToolCalled
	}); err != nil {
		return err
	}
	_ = a.send(ctx, map[string]any{"type": protocol.TypeCancel, "turn_id": id})
	if _, err := a.until(ctx, plannerEnd); err != nil {
		return err
	}

	fmt.Println("## a snapshot lists the workers")
	b, err := dial(ctx, server, sid, "B")
	if err != nil {
		return err
	}
	defer b.c.CloseNow()
	_ = b.send(ctx, map[string]any{"type": protocol.TypeSubscribe, "filter": "preset:chat", "snapshot": true})
	if _, err := b.until(ctx, isType(protocol.TypeSnapshot)); err != nil {
		return err
	}
	_ = a.c.Close(websocket.StatusNormalClosure, "")
	_ = b.c.Close(websocket.StatusNormalClosure, "")
	return nil
}
