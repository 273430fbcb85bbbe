package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/routing"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/tool"
)

// calls is a model that asks for the given tool calls in one message,
// then ends the turn.
type calls [][2]string // name, input

func (c calls) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	if len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == message.RoleTool {
		if err := emit(model.Delta{Kind: model.KindText, Text: "done"}); err != nil {
			return model.Result{}, err
		}
		return model.Result{StopReason: model.StopEndTurn}, emit(model.Delta{Kind: model.KindBlockStop})
	}
	for i, call := range c {
		for _, d := range []model.Delta{
			{Kind: model.KindToolUseStart, Index: i, ToolUseID: "call_" + call[0], ToolName: call[0]},
			{Kind: model.KindToolInput, Index: i, Text: call[1]},
			{Kind: model.KindBlockStop, Index: i},
		} {
			if err := emit(d); err != nil {
				return model.Result{}, err
			}
		}
	}
	return model.Result{StopReason: model.StopToolUse}, nil
}

// runTurn runs one turn of the agent loop, with the manager as its tool
// source, and returns its events.
func runTurn(t *testing.T, m tool.Source, adapter model.Adapter) []*event.Event {
	t.Helper()
	dir := t.TempDir()
	ctx := ctxT(t, 2*time.Minute)
	st, err := store.Open(ctx, store.Options{Path: filepath.Join(dir, "t.db")})
	servertest.Must(t, err)
	rec := servertest.NewRecorder()
	b := bus.New(st, bus.Options{Live: rec})
	defer func() {
		servertest.Must(t, b.Close(context.Background()))
		servertest.Must(t, st.Close())
	}()
	models := model.NewRegistry()
	models.Register("fake", adapter)
	loop := agent.New(agent.Config{Models: models, Tools: tool.NewRegistry(tool.Builtins()...), Prices: price.NewTable(nil, nil),
		ToolSource: m, History: agent.HistoryFunc(func(ctx context.Context, id string) ([]message.Message, error) {
			msgs, _, err := st.Messages(ctx, id, "", 0)
			return msgs, err
		})})
	sid := "sess_mcp"
	servertest.Must(t, st.Apply(ctx, store.CreateSession{Session: store.Session{ID: sid, WorkspacePath: dir, ActiveModel: "fake:m", CreatedAt: time.Now()}}))
	em, err := b.Emitter(ctx, sid)
	servertest.Must(t, err)
	root, err := os.OpenRoot(dir)
	servertest.Must(t, err)
	defer root.Close()
	turn := event.NewID("turn_")
	user := message.Message{ID: event.NewID("msg_"), SessionID: sid, TurnID: turn, Role: message.RoleUser,
		Content: []message.Block{message.Text("go")}, Status: message.StatusComplete}
	_, err = em.EmitWait(ctx, bus.Spec{Type: event.TurnStarted, TurnID: turn, Actor: "user", Payload: map[string]any{"user_message": user},
		Ops: []store.Op{store.PutMessage{Message: user}, store.PutTurn{Turn: store.Turn{ID: turn, SessionID: sid, Status: store.TurnInFlight}}}})
	servertest.Must(t, err)
	loop.Run(ctx, agent.Turn{ID: turn, SessionID: sid, SessionModel: "fake:m", Root: root, Emitter: em, Router: routing.NewStatic(), UserText: "go"})
	servertest.Must(t, em.Barrier(ctx))
	return rec.Events(sid)
}

func TestATurnCallsThreeServersConcurrently(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "a", "tools"), faultEntry(t, "b", "tools"), faultEntry(t, "c", "tools"))
	meet := t.TempDir()
	in := `{"dir": "` + meet + `", "n": 3}`
	// Each call waits until the three have arrived, each at its own
	// server: run one after the other, the first would wait in vain.
	evs := runTurn(t, m, calls{{"mcp__a__rendezvous", in}, {"mcp__b__rendezvous", in}, {"mcp__c__rendezvous", in}})
	var completed []string
	for _, e := range evs {
		var p map[string]any
		_ = json.Unmarshal(e.Payload, &p)
		switch e.Type {
		case event.ToolCompleted:
			if p["result"] != "met 3" {
				t.Errorf("%v: %v", p["tool_name"], p["result"])
			}
			completed = append(completed, p["tool_name"].(string))
		case event.ToolFailed:
			t.Errorf("%v failed: %v", p["tool_name"], p["message"])
		case event.TurnCompleted:
			if p["outcome"] != "completed" {
				t.Errorf("turn: %v", p)
			}
		}
	}
	if len(completed) != 3 {
		t.Fatalf("completed: %v (%v)", completed, servertest.Types(evs))
	}
	// Each server ran its own call.
	if entries, _ := os.ReadDir(meet); len(entries) != 3 {
		t.Fatalf("%d server processes took part", len(entries))
	}
	if got := strings.Join(completed, ","); !strings.Contains(got, "mcp__a__") || !strings.Contains(got, "mcp__b__") || !strings.Contains(got, "mcp__c__") {
		t.Fatalf("completed: %s", got)
	}
}
