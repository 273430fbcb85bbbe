package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// waitFor waits until the session's live events hold one of type typ
// (after the first skip) and returns its payload.
func waitFor(t *testing.T, h *servertest.Harness, sid string, typ event.Type, skip int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if evs := liveEvents(t, h, sid, typ); len(evs) > skip {
			return evs[skip]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s", typ)
	return nil
}

// TestCompactByHand: POST /sessions/{id}/compact answers 202 with the
// compaction's id, summarises the conversation with the instructions
// given (context.compacting, context.compacted, outside any turn), keeps
// every stored message and adds the compaction message; the next turn
// sends the summary. While it runs a turn is refused (409), and while a
// turn runs it is refused (409); its id cancels it.
func TestCompactByHand(t *testing.T) {
	h := servertest.Start(t, "")
	writeNotes(t, h.Workspace)
	rec := record(t, h, "builtin")
	sid := h.CreateSession()
	runTurns(t, h, sid, 0, 6)

	var bad protocol.HTTPError
	if st := h.Do("POST", "/sessions/"+sid+"/compact", map[string]string{"instructions": strings.Repeat("x", 5000)}, &bad); st != 400 || bad.Error.Code != "invalid_request" {
		t.Fatalf("long instructions: %d %+v", st, bad)
	}
	if st := h.Do("POST", "/sessions/sess_nope/compact", nil, &bad); st != 404 || bad.Error.Code != "session_not_found" {
		t.Fatalf("unknown session: %d %+v", st, bad)
	}

	// While a turn runs: 409.
	held, release := rec.holdCalls("")
	turn := h.Submit(sid, "turn 6: hello")
	<-held
	if st := h.Do("POST", "/sessions/"+sid+"/compact", nil, &bad); st != 409 || bad.Error.Code != "turn_in_flight" {
		t.Fatalf("compact during a turn: %d %+v", st, bad)
	}
	release()
	h.WaitTurn(sid)
	if row, _ := h.Server.Store.Turn(context.Background(), turn); row.Status != store.TurnCompleted {
		t.Fatalf("turn: %s", row.Status)
	}

	// A compaction by hand, held in its summary call: a turn is refused.
	held, release = rec.holdCalls(model.TaskSummary)
	var acc protocol.CompactAccepted
	if st := h.Do("POST", "/sessions/"+sid+"/compact", map[string]string{"instructions": "keep the file names"}, &acc); st != 202 || !strings.HasPrefix(acc.CompactionID, "cmp_") {
		t.Fatalf("compact: %d %+v", st, acc)
	}
	<-held
	if st := h.Do("POST", "/sessions/"+sid+"/turns", map[string]string{"content": "too soon"}, &bad); st != 409 || bad.Error.Code != "turn_in_flight" {
		t.Fatalf("a turn during a compaction: %d %+v", st, bad)
	}
	release()
	done := waitFor(t, h, sid, event.ContextCompacted, 0)
	if done["trigger"] != "manual" || done["method"] != "summary" || done["compaction_id"] != acc.CompactionID ||
		done["tokens_after"].(float64) >= done["tokens_before"].(float64) {
		t.Fatalf("context.compacted %v", done)
	}
	for _, e := range h.Live.Events(sid) {
		if (e.Type == event.ContextCompacting || e.Type == event.ContextCompacted) && (e.TurnID != "" || e.Actor != event.ActorSession) {
			t.Fatalf("%s in turn %q by %s", e.Type, e.TurnID, e.Actor)
		}
	}
	var summary model.Request
	for _, r := range rec.requests() {
		if r.Task == model.TaskSummary {
			summary = r
		}
	}
	if !strings.Contains(summary.Messages[0].PlainText(), "keep in particular: keep the file names") {
		t.Fatalf("the summary request lacks the instructions:\n%s", summary.Messages[0].PlainText())
	}
	h.Server.Sessions.Wait(context.Background(), sid)
	msgs := allMessages(t, h, sid)
	if len(msgs) != 7*4+1 {
		t.Fatalf("%d messages after the compaction", len(msgs))
	}

	// A snapshot shows the marker among the messages.
	if !snapshotHasCompaction(t, h, sid) {
		t.Fatal("the snapshot's messages lack the compaction message")
	}

	// The next turn sends the summary.
	n := len(rec.requests())
	runTurns(t, h, sid, 7, 8)
	if first := rec.requests()[n].Messages[0].PlainText(); !strings.Contains(first, "<summary>") {
		t.Fatalf("the next turn starts with %q", first)
	}

	// Cancelled by its id.
	held, release = rec.holdCalls(model.TaskSummary)
	defer release()
	h.Do("POST", "/sessions/"+sid+"/compact", nil, &acc)
	<-held
	var cancel map[string]string
	if st := h.Do("POST", "/sessions/"+sid+"/turns/"+acc.CompactionID+"/cancel", nil, &cancel); st != 202 || cancel["status"] != "cancelling" {
		t.Fatalf("cancel: %d %v", st, cancel)
	}
	if p := waitFor(t, h, sid, event.ContextCompactionFailed, 0); p["error_class"] != "cancelled" || p["compaction_id"] != acc.CompactionID {
		t.Fatalf("context.compaction_failed %v", p)
	}
}

// TestSystemPromptEndpoint: GET /sessions/{id}/system-prompt shows the
// prompt the next call sends, AGENTS.md included, with the digest the
// calls' llm.call_started carry.
func TestSystemPromptEndpoint(t *testing.T) {
	h := servertest.Start(t, "")
	servertest.Must(t, os.WriteFile(filepath.Join(h.Workspace, "AGENTS.md"), []byte("Run go vet before committing."), 0o644))
	servertest.Must(t, os.WriteFile(filepath.Join(h.Home, "AGENTS.md"), []byte("Be brief."), 0o644))
	sid := h.CreateSession()
	var p protocol.SystemPrompt
	if st := h.Do("GET", "/sessions/"+sid+"/system-prompt", nil, &p); st != 200 {
		t.Fatalf("status %d", st)
	}
	if !strings.Contains(p.Text, "Run go vet before committing.") || !strings.Contains(p.Text, "Be brief.") || len(p.Sources) != 2 ||
		p.Sources[1].Path != "AGENTS.md" || p.Sources[0].Path != filepath.Join(h.Home, "AGENTS.md") {
		t.Fatalf("prompt %+v", p)
	}
	h.Submit(sid, "/echo hi")
	h.WaitTurn(sid)
	started := liveEvents(t, h, sid, event.LLMCallStarted)[0]["request"].(map[string]any)
	if started["system_sha256"] != p.SHA256 {
		t.Fatalf("llm.call_started system_sha256 %v, the endpoint %s", started["system_sha256"], p.SHA256)
	}
	if st := h.Do("GET", "/sessions/sess_nope/system-prompt", nil, nil); st != 404 {
		t.Fatalf("unknown session: %d", st)
	}
}

// TestSessionBudget: a new session starts with the configured limits; a
// turn whose next call would pass the session's limit ends
// budget_exceeded; PATCH /sessions/{id} raises the limit
// (session.budget_changed) and the next turn runs; bad values are
// refused with 400.
func TestSessionBudget(t *testing.T) {
	fake := newCachingAnthropic()
	api := httptest.NewServer(fake)
	defer api.Close()
	h := servertest.Start(t, "", withAnthropic(api.URL), func(c *config.Config) { c.MaxSessionCost = 0.000001 })
	sid := createWithModel(t, h, sonnet)
	var info protocol.AttachInfo
	h.Do("GET", "/sessions/"+sid, nil, &info)
	if s := info.Session; s.MaxTurnCostUSD != config.DefaultMaxTurnCost || s.MaxSessionCostUSD != 0.000001 || s.ContextWindow != 1000000 {
		t.Fatalf("summary limits %+v", s)
	}
	turn := h.Submit(sid, "hello")
	h.WaitTurn(sid)
	if row, _ := h.Server.Store.Turn(context.Background(), turn); row.Status != store.TurnFailed || row.Reason != "budget_exceeded" {
		t.Fatalf("turn over the budget: %s %s", row.Status, row.Reason)
	}
	b := liveEvents(t, h, sid, event.TurnCompleted)[0]["budget"].(map[string]any)
	if b["kind"] != "session_cost" || b["limit"] != 0.000001 {
		t.Fatalf("budget %v", b)
	}
	for _, body := range []string{`{}`, `{"max_session_cost_usd": -1}`, `{"max_turn_cost_usd": 1e9}`, `{"max_session_cost_usd": "ten"}`} {
		var e protocol.HTTPError
		if st := h.Do("PATCH", "/sessions/"+sid, jsonRaw(body), &e); st != 400 {
			t.Fatalf("PATCH %s: %d %+v", body, st, e)
		}
	}
	var s protocol.SessionSummary
	if st := h.Do("PATCH", "/sessions/"+sid, map[string]float64{"max_session_cost_usd": 10}, &s); st != 200 || s.MaxSessionCostUSD != 10 || s.MaxTurnCostUSD != config.DefaultMaxTurnCost {
		t.Fatalf("PATCH: %d %+v", st, s)
	}
	if p := waitFor(t, h, sid, event.SessionBudgetChanged, 0); p["max_session_cost_usd"] != 10.0 {
		t.Fatalf("session.budget_changed %v", p)
	}
	turn = h.Submit(sid, "hello again")
	h.WaitTurn(sid)
	if row, _ := h.Server.Store.Turn(context.Background(), turn); row.Status != store.TurnCompleted {
		t.Fatalf("turn after raising the limit: %s %s", row.Status, row.Reason)
	}
	if st := h.Do("PATCH", "/sessions/sess_nope", map[string]float64{"max_session_cost_usd": 1}, nil); st != 404 {
		t.Fatalf("unknown session: %d", st)
	}
}

// snapshotHasCompaction reads the snapshot of an SSE subscription and
// reports whether its messages hold a compaction block.
func snapshotHasCompaction(t *testing.T, h *servertest.Harness, sid string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL+"/sessions/"+sid+"/events?snapshot=true", nil)
	servertest.Must(t, err)
	resp, err := h.HTTP.Do(req)
	servertest.Must(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var snap struct {
			Type     string            `json:"type"`
			Messages []message.Message `json:"messages"`
		}
		servertest.Must(t, json.Unmarshal([]byte(d), &snap))
		if snap.Type != "snapshot" {
			continue
		}
		for _, m := range snap.Messages {
			for _, b := range m.Content {
				if b.Type == message.BlockCompaction && b.Compaction != nil && b.Compaction.Summary != "" {
					return true
				}
			}
		}
		return false
	}
	t.Fatal("no snapshot")
	return false
}

// jsonRaw is a request body sent as is.
type jsonRaw string

func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }

// TestCompactionWithWorkers: a planner on a small window that delegates
// every turn (each worker a session of its own, on the same window)
// runs 40 turns without a failure; the planner is compacted while its
// workers come and go, and every worker completes.
func TestCompactionWithWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("40 delegations")
	}
	h := servertest.Start(t, "", func(c *config.Config) { // a window 40 delegations outgrow
		c.Models = map[string]price.Limits{"builtin:demo": {ContextWindow: 6000, MaxOutputTokens: 400}}
	})
	sid := h.CreateSession()
	for i := range 40 {
		id := h.Submit(sid, delegateCmd(fmt.Sprintf("turn %d: list the workspace and say what is there", i)))
		h.WaitTurn(sid)
		if row, _ := h.Server.Store.Turn(context.Background(), id); row.Status != store.TurnCompleted {
			t.Fatalf("turn %d: %s %s", i, row.Status, row.Reason)
		}
	}
	if n := len(liveEvents(t, h, sid, event.ContextCompacted)); n == 0 {
		t.Fatal("the planner was never compacted")
	}
	if n := len(liveEvents(t, h, sid, event.DelegateCompleted)); n != 40 {
		t.Fatalf("%d delegations completed", n)
	}
}
