package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/model/openai"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
)

// listDir is a tool call of the built-in list_dir tool.
func listDir(index int, id string) []model.Delta {
	return []model.Delta{
		{Kind: model.KindToolUseStart, Index: index, ToolUseID: id, ToolName: "list_dir"},
		{Kind: model.KindToolInput, Index: index, Text: `{"path": "."}`},
		{Kind: model.KindBlockStop, Index: index},
	}
}

// useSession points the rig at another session of its store.
func (r *rig) useSession(id string) {
	r.t.Helper()
	servertest.Must(r.t, r.st.Apply(context.Background(), store.CreateSession{Session: store.Session{ID: id,
		WorkspacePath: r.root.Name(), ActiveModel: "fake:m", CreatedAt: time.Now()}}))
	em, err := r.bus.Emitter(context.Background(), id)
	servertest.Must(r.t, err)
	r.sid, r.em = id, em
}

// TestSameProviderIDInTwoSessions: two sessions whose models both use
// "call_1" keep one tool call row each, both completed.
func TestSameProviderIDInTwoSessions(t *testing.T) {
	q := func() *seq {
		return &seq{scripts: []script{
			{deltas: listDir(0, "call_1"), result: model.Result{StopReason: model.StopToolUse}},
			{deltas: []model.Delta{{Kind: model.KindText, Text: "done"}}, result: model.Result{StopReason: model.StopEndTurn}},
		}}
	}
	r := newRig(t, q())
	ctx := context.Background()
	type ran struct{ sid, turn, msg string }
	var runs []ran
	for _, sid := range []string{"sess_one", "sess_two"} {
		r.useSession(sid)
		r.loop = agentWith(r, q())
		out, evs := r.run(ctx, "fake:m")
		if out.Status != store.TurnCompleted {
			t.Fatalf("%s: outcome %+v", sid, out)
		}
		runs = append(runs, ran{sid, evs[0].TurnID, payload(t, find(evs, event.LLMCallCompleted)[0])["message_id"].(string)})
	}
	for _, x := range runs {
		calls, err := r.st.ToolCalls(ctx, x.turn)
		if err != nil || len(calls) != 1 || calls[0].SessionID != x.sid || calls[0].Status != store.ToolCompleted {
			t.Fatalf("%s: tool calls of its turn %+v, %v", x.sid, calls, err)
		}
		if c, err := r.st.ToolCall(ctx, x.sid, x.msg, "call_1"); err != nil || c.TurnID != x.turn {
			t.Fatalf("%s: row %+v, %v", x.sid, c, err)
		}
	}
}

// TestDuplicateToolUseIDsInOneMessage: a message with two calls "dup"
// and one with no id: the later duplicate is renamed "dup_dup2" and the
// id-less one gets a metis id, the same in the streaming events,
// message.complete, tool.called/completed, the rows, the stored
// conversation and the request sent back to the model.
func TestDuplicateToolUseIDsInOneMessage(t *testing.T) {
	var seen []message.Message
	deltas := slices.Concat(listDir(0, "dup"), listDir(1, "dup"), listDir(2, ""))
	q := &seq{scripts: []script{
		{deltas: deltas, result: model.Result{StopReason: model.StopToolUse}},
		{deltas: []model.Delta{{Kind: model.KindText, Text: "done"}}, result: model.Result{StopReason: model.StopEndTurn}},
	}}
	r := newRig(t, &recordingAdapter{inner: q, seen: &seen})
	ctx := context.Background()
	out, evs := r.run(ctx, "fake:m")
	if out.Status != store.TurnCompleted {
		t.Fatalf("outcome %+v", out)
	}
	idsOf := func(typ event.Type) []string {
		var ids []string
		for _, e := range find(evs, typ) {
			ids = append(ids, payload(t, e)["tool_use_id"].(string))
		}
		return ids
	}
	starts := idsOf(event.ToolUseStart)
	if len(starts) != 3 || starts[0] != "dup" || starts[1] != "dup_dup2" || !strings.HasPrefix(starts[2], "call_metis_") {
		t.Fatalf("tool.use_start ids %v", starts)
	}
	for _, typ := range []event.Type{event.ToolUseEnd, event.ToolCalled} {
		if got := idsOf(typ); !slices.Equal(got, starts) {
			t.Errorf("%s ids %v, want %v", typ, got, starts)
		}
	}
	if got := idsOf(event.ToolCompleted); len(got) != 3 || !sameSet(got, starts) {
		t.Errorf("tool.completed ids %v, want %v", got, starts)
	}
	var final struct {
		Content []message.Block `json:"final_content"`
	}
	servertest.Must(t, json.Unmarshal(find(evs, event.MessageComplete)[0].Payload, &final))
	if got := blockIDs(final.Content, message.BlockToolUse); !slices.Equal(got, starts) {
		t.Errorf("message.complete tool_use ids %v, want %v", got, starts)
	}
	calls, err := r.st.ToolCalls(ctx, evs[0].TurnID)
	servertest.Must(t, err)
	var rows []string
	for _, c := range calls {
		if c.Status != store.ToolCompleted {
			t.Errorf("row %+v", c)
		}
		rows = append(rows, c.ID)
	}
	if !sameSet(rows, starts) {
		t.Errorf("rows %v, want %v", rows, starts)
	}
	stored, _, err := r.st.Messages(ctx, r.sid, "", 0)
	servertest.Must(t, err)
	if len(stored) != 4 {
		t.Fatalf("%d stored messages", len(stored))
	}
	if got := blockIDs(stored[1].Content, message.BlockToolUse); !slices.Equal(got, starts) {
		t.Errorf("stored tool_use ids %v", got)
	}
	if got := blockIDs(stored[2].Content, message.BlockToolResult); !slices.Equal(got, starts) {
		t.Errorf("stored tool_result ids %v", got)
	}
	// The second call was sent exactly the stored conversation so far.
	if len(seen) != 3 || !slices.Equal(blockIDs(seen[1].Content, message.BlockToolUse), starts) ||
		!slices.Equal(blockIDs(seen[2].Content, message.BlockToolResult), starts) {
		t.Errorf("request to the model %+v", seen)
	}
}

func blockIDs(bs []message.Block, typ string) []string {
	var ids []string
	for _, b := range bs {
		switch {
		case b.Type != typ:
		case typ == message.BlockToolUse:
			ids = append(ids, b.ID)
		default:
			ids = append(ids, b.ToolUseID)
		}
	}
	return ids
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestIDlessCompatServerOverSeveralTurns: an OpenAI-compatible server
// that never sends tool call ids, over several turns of one session:
// every call gets its own id and row, every row ends completed, and each
// request carries tool results that match its tool calls.
func TestIDlessCompatServerOverSeveralTurns(t *testing.T) {
	chunk := func(delta map[string]any, finish any) string {
		b, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		return "data: " + string(b) + "\n\n"
	}
	call := func(i int) string {
		return chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "type": "function",
			"function": map[string]any{"name": "list_dir", "arguments": `{"path": "."}`}}}}, nil)
	}
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		bodies = append(bodies, body) // requests are sequential
		msgs := body["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		w.Header().Set("Content-Type", "text/event-stream")
		if last["role"] == "tool" {
			fmt.Fprint(w, chunk(map[string]any{"content": "done"}, "stop"), "data: [DONE]\n\n")
			return
		}
		fmt.Fprint(w, call(0), call(1), chunk(map[string]any{}, "tool_calls"), "data: [DONE]\n\n")
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	a, err := openai.New(openai.Options{BaseURL: srv.URL + "/v1", HTTPClient: &http.Client{Transport: tr},
		Retry: model.RetryPolicy{Attempts: 1}})
	servertest.Must(t, err)
	r := newRig(t, nil)
	models := model.NewRegistry()
	models.Register("openai", a)
	r.loop = agent.New(agent.Config{Models: models, Tools: r.tools, Prices: price.NewTable(nil, nil),
		History: agent.HistoryFunc(func(ctx context.Context, id string) ([]message.Message, error) {
			msgs, _, err := r.st.Messages(ctx, id, "", 0)
			return msgs, err
		})})
	ctx := context.Background()
	seen := map[string]bool{}
	const turns = 3
	for turn := range turns {
		out, evs := r.run(ctx, "openai:m")
		if out.Status != store.TurnCompleted {
			t.Fatalf("turn %d: outcome %+v", turn, out)
		}
		calls, err := r.st.ToolCalls(ctx, evs[0].TurnID)
		servertest.Must(t, err)
		if len(calls) != 2 {
			t.Fatalf("turn %d: %d rows", turn, len(calls))
		}
		for _, c := range calls {
			if c.Status != store.ToolCompleted || seen[c.ID] {
				t.Fatalf("turn %d: row %+v (ids seen %v)", turn, c, seen)
			}
			seen[c.ID] = true
		}
	}
	// Every request: each tool message answers a call of the assistant
	// message before it.
	for i, body := range bodies {
		calls := map[string]bool{}
		for _, m := range body["messages"].([]any) {
			m := m.(map[string]any)
			for _, tc := range asSlice(m["tool_calls"]) {
				calls[tc.(map[string]any)["id"].(string)] = true
			}
			if m["role"] == "tool" && !calls[m["tool_call_id"].(string)] {
				t.Fatalf("request %d: tool result %v answers no call", i, m["tool_call_id"])
			}
		}
	}
	if len(bodies) != 2*turns {
		t.Fatalf("%d requests", len(bodies))
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
