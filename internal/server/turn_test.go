package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// canonicalTurn is the catalog sequence of a builtin:demo turn: one tool
// round trip (list_dir) and a final answer.
var canonicalTurn = []event.Type{
	event.TurnStarted, event.RouteDecided,
	event.LLMCallStarted, event.LLMCallCompleted, event.ToolCalled, event.ToolCompleted,
	event.LLMCallStarted, event.LLMCallCompleted,
	event.TurnCompleted,
}

func catalogOnly(ts []event.Type) []event.Type {
	var out []event.Type
	for _, t := range ts {
		if event.FamilyOf(t) == event.Catalog && t != event.BusHandlerWarning {
			out = append(out, t)
		}
	}
	return out
}

// TestTurnEndToEndSurvivesRestart is the backbone's acceptance test: a
// turn on builtin:demo leaves the canonical sequence in the trace store,
// the live stream carries the streaming events in canonical order, the
// messages endpoint shows the conversation, and all of it survives a
// restart.
func TestTurnEndToEndSurvivesRestart(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	turn := h.Submit(sid, "what is in my workspace?")
	h.WaitTurn(sid)

	ctx := context.Background()
	stored, err := h.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}})
	servertest.Must(t, err)
	want := append([]event.Type{event.SessionCreated}, canonicalTurn...)
	if got := servertest.Types(stored); !slices.Equal(got, want) {
		t.Fatalf("stored sequence\n got %v\nwant %v", got, want)
	}
	for _, ev := range stored {
		if event.FamilyOf(ev.Type) != event.Catalog {
			t.Errorf("streaming event %s persisted", ev.Type)
		}
		if ev.Type != event.SessionCreated && ev.TurnID != turn {
			t.Errorf("%s has turn_id %q, want %q", ev.Type, ev.TurnID, turn)
		}
	}

	live := h.Live.Events(sid)
	if got := catalogOnly(servertest.Types(live)); !slices.Equal(got[1:], canonicalTurn) {
		t.Fatalf("live catalog sequence %v", got)
	}
	checkLiveOrder(t, live)

	var page struct {
		Messages []message.Message `json:"messages"`
		HasMore  bool              `json:"has_more"`
	}
	if st := h.Do("GET", "/sessions/"+sid+"/messages", nil, &page); st != 200 {
		t.Fatalf("messages: %d", st)
	}
	roles := []message.Role{}
	for _, m := range page.Messages {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []message.Role{message.RoleUser, message.RoleAssistant, message.RoleTool, message.RoleAssistant}) {
		t.Fatalf("roles %v", roles)
	}
	if page.Messages[2].Content[0].Type != message.BlockToolResult || !strings.Contains(page.Messages[2].Content[0].Content, "README.md") {
		t.Errorf("tool result %+v", page.Messages[2].Content)
	}
	final := page.Messages[3].PlainText()
	if !strings.Contains(final, "README.md") {
		t.Errorf("final answer does not use the tool result: %q", final)
	}

	var sum struct {
		Session struct {
			TurnCount     int     `json:"turn_count"`
			CurrentTurnID *string `json:"current_turn_id"`
		} `json:"session"`
	}
	servertest.WaitFor(t, "turn count", func() bool {
		h.Do("GET", "/sessions/"+sid, nil, &sum)
		return sum.Session.TurnCount == 1
	})
	if sum.Session.CurrentTurnID != nil {
		t.Errorf("current turn %v after the turn ended", *sum.Session.CurrentTurnID)
	}

	// Restart on the same home: the events and messages are still there.
	h.Stop()
	h2 := servertest.Start(t, h.Home)
	again, err := h2.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}})
	servertest.Must(t, err)
	if len(again) != len(stored) || again[len(again)-1].ID != stored[len(stored)-1].ID {
		t.Fatalf("after restart: %d events, want %d", len(again), len(stored))
	}
	var page2 struct {
		Messages []message.Message `json:"messages"`
	}
	h2.Do("GET", "/sessions/"+sid+"/messages", nil, &page2)
	if len(page2.Messages) != 4 || page2.Messages[3].PlainText() != final {
		t.Fatalf("messages after restart: %+v", page2.Messages)
	}
	// A second turn continues the conversation with ids after the old ones.
	h2.Submit(sid, "/echo again")
	h2.WaitTurn(sid)
	after, _ := h2.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}, AfterID: stored[len(stored)-1].ID})
	if len(after) == 0 || after[0].Type != event.TurnStarted {
		t.Fatalf("second turn events: %v", servertest.Types(after))
	}
}

// checkLiveOrder checks the §5.3 order of one model call's streaming
// events and that ids strictly increase.
func checkLiveOrder(t *testing.T, evs []*event.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].ID <= evs[i-1].ID {
			t.Fatalf("live ids not increasing at %d: %s after %s", i, evs[i].ID, evs[i-1].ID)
		}
	}
	// Between llm.call_started and llm.call_completed: message.start
	// first, message.complete last, deltas in between.
	var inCall []event.Type
	for _, ev := range evs {
		switch ev.Type {
		case event.LLMCallStarted:
			inCall = []event.Type{}
		case event.LLMCallCompleted, event.LLMCallFailed:
			if len(inCall) < 2 || inCall[0] != event.MessageStart || inCall[len(inCall)-1] != event.MessageComplete {
				t.Fatalf("call streaming events %v", inCall)
			}
			inCall = nil
		default:
			if inCall != nil {
				inCall = append(inCall, ev.Type)
			}
		}
	}
	// The reconstructed text equals message.complete's final content.
	text := map[string]string{}
	for _, ev := range evs {
		switch ev.Type {
		case event.TextDelta:
			var p struct {
				MessageID string `json:"message_id"`
				Text      string `json:"text"`
			}
			json.Unmarshal(ev.Payload, &p)
			text[p.MessageID] += p.Text
		case event.MessageComplete:
			var p struct {
				MessageID    string          `json:"message_id"`
				FinalContent []message.Block `json:"final_content"`
			}
			json.Unmarshal(ev.Payload, &p)
			m := message.Message{Content: p.FinalContent}
			if m.PlainText() != text[p.MessageID] {
				t.Fatalf("deltas %q != final %q", text[p.MessageID], m.PlainText())
			}
		}
	}
}
