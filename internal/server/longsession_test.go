package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// recorder wraps the registry's adapter of a provider and keeps every
// request it is given. With hold set, a call whose task is holdTask
// signals held and waits for ctx to end (or hold to be closed).
type recorder struct {
	inner model.Adapter
	mu    sync.Mutex
	reqs  []model.Request

	holdTask string
	hold     chan struct{}
	held     chan struct{}
}

func (r *recorder) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	hold, held := r.hold, r.held
	r.mu.Unlock()
	if hold != nil && req.Task == r.holdTask {
		held <- struct{}{}
		select {
		case <-hold:
		case <-ctx.Done():
			return model.Result{}, ctx.Err()
		}
	}
	return r.inner.Stream(ctx, req, emit)
}

// holdCalls makes the calls of task wait (see recorder) until the
// returned function is called.
func (r *recorder) holdCalls(task string) (held <-chan struct{}, release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holdTask, r.hold, r.held = task, make(chan struct{}), make(chan struct{}, 16)
	hold := r.hold
	return r.held, func() {
		r.mu.Lock()
		r.hold = nil
		r.mu.Unlock()
		close(hold)
	}
}

func (r *recorder) requests() []model.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]model.Request(nil), r.reqs...)
}

// record puts a recorder in front of provider's adapter.
func record(t *testing.T, h *servertest.Harness, provider string) *recorder {
	t.Helper()
	a, err := h.Server.Models.Resolve(provider + ":any")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{inner: a}
	h.Server.Models.Register(provider, r)
	return r
}

// wire is what a model call sends, as the provider sees it: for
// builtin:demo the request without metis's own message ids and times.
func wire(t *testing.T, req model.Request) string {
	t.Helper()
	type msg struct {
		Role    message.Role    `json:"role"`
		Content []message.Block `json:"content"`
	}
	ms := make([]msg, len(req.Messages))
	for i, m := range req.Messages {
		ms[i] = msg{m.Role, m.Content}
	}
	b, err := json.Marshal(struct {
		Model     string           `json:"model"`
		System    string           `json:"system"`
		Tools     []model.ToolSpec `json:"tools"`
		MaxTokens int              `json:"max_tokens"`
		Messages  []msg            `json:"messages"`
		Task      string           `json:"task"`
	}{req.Model, req.System, req.Tools, req.MaxTokens, ms, req.Task})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// smallWindowTokens is the small window the long-session tests give
// builtin:demo: room for its system prompt and every tool's definition
// (about 2,000 tokens, a tenth of it), the recent turns kept
// verbatim and the stubbed results before them.
const smallWindowTokens = 20000

// smallWindow gives builtin:demo a window of smallWindowTokens and a
// 400-token output limit.
func smallWindow(c *config.Config) {
	c.Models = map[string]price.Limits{"builtin:demo": {ContextWindow: smallWindowTokens, MaxOutputTokens: 400}}
	// The figures of these tests were set with the tool list before
	// background commands: shell_output and shell_kill would add their
	// specs to every request and move where compactions fall.
	c.BackgroundCommands = 0
}

// longTurn is the user text of turn i: a file read (a tool result of
// 3 KB) on even turns, the demo's list_dir on odd ones.
func longTurn(i int) string {
	if i%2 == 0 {
		return fmt.Sprintf(`/tool read_file {"path": "notes.txt", "turn": %d}`, i)
	}
	return fmt.Sprintf("turn %d: what is in the workspace?", i)
}

func writeNotes(t *testing.T, ws string) {
	t.Helper()
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, "note %02d: the build takes a while; keep the cache warm and the tests short\n", i)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runTurns runs turns from..to-1 and fails the test on any turn that
// does not complete.
func runTurns(t *testing.T, h *servertest.Harness, sid string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		id := h.Submit(sid, longTurn(i))
		h.WaitTurn(sid)
		row, err := h.Server.Store.Turn(context.Background(), id)
		if err != nil || row.Status != store.TurnCompleted {
			t.Fatalf("turn %d ended %q (%s), want completed: %v", i, row.Status, row.Reason, err)
		}
	}
}

// TestLongSessionOnASmallWindowNeverFails: a builtin:demo session with a
// small window (smallWindowTokens) runs 200 turns that read a 3 KB file or list the
// workspace. Every turn completes; every model request (the turns' and
// the summaries') fits the window with its max_tokens; the conversation
// was compacted (by stubs and by summaries); every stored message is
// still returned by GET /messages, in order; and a restart after turn
// 100 sends exactly the request the server would have sent without it.
func TestLongSessionOnASmallWindowNeverFails(t *testing.T) {
	if testing.Short() {
		t.Skip("200 turns")
	}
	home := t.TempDir()
	h := servertest.Start(t, home, smallWindow)
	writeNotes(t, h.Workspace)
	rec := record(t, h, "builtin")
	sid := h.CreateSession()
	runTurns(t, h, sid, 0, 100)

	// A consistent copy of the store as it is now, for the restart.
	home2 := t.TempDir()
	copyStore(t, filepath.Join(home, "metis.db"), filepath.Join(home2, "metis.db"))
	n := len(rec.requests())
	runTurns(t, h, sid, 100, 200)
	withoutRestart := firstCall(rec.requests()[n:])

	// The restart: a server on the copy, which has only the store.
	h2 := servertest.Start(t, home2, smallWindow)
	rec2 := record(t, h2, "builtin")
	h2.Submit(sid, longTurn(100))
	h2.WaitTurn(sid)
	afterRestart := firstCall(rec2.requests())
	if len(afterRestart) != len(withoutRestart) {
		t.Fatalf("turn 100 began with %d requests after the restart, %d without", len(afterRestart), len(withoutRestart))
	}
	for i := range afterRestart {
		if got, want := wire(t, afterRestart[i]), wire(t, withoutRestart[i]); got != want {
			t.Errorf("request %d of turn 100 differs after the restart\n got %s\nwant %s", i, got, want)
		}
	}

	// The summary shows the context's size against the window.
	var info protocol.AttachInfo
	h.Do("GET", "/sessions/"+sid, nil, &info)
	if sum := info.Session; sum.ContextWindow != smallWindowTokens || sum.ContextTokens <= 0 || sum.ContextTokens > smallWindowTokens {
		t.Errorf("summary context %d of %d tokens", info.Session.ContextTokens, info.Session.ContextWindow)
	}

	// Every request fit the window.
	reqs := rec.requests()
	var summaries int
	for i, req := range reqs {
		if req.Task == model.TaskSummary {
			summaries++
		}
		if size := model.EstimateTokens(req) + req.MaxTokens; size > smallWindowTokens {
			t.Errorf("request %d (%q) is %d tokens with its max_tokens, over the %d-token window", i, req.Task, size, smallWindowTokens)
		}
	}

	// Compactions happened, and every message is still stored.
	msgs := allMessages(t, h, sid)
	var users, compactions, methods = 0, 0, map[string]int{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == message.BlockCompaction {
				compactions++
				methods[b.Compaction.Method]++
			}
		}
		if m.Role == message.RoleUser && m.PlainText() != "" {
			if want := longTurn(users); m.PlainText() != want {
				t.Fatalf("user message %d is %q, want %q", users, m.PlainText(), want)
			}
			users++
		}
	}
	if users != 200 || len(msgs) != 200*4+compactions {
		t.Errorf("%d messages (%d user messages, %d compactions), want %d", len(msgs), users, compactions, 200*4+compactions)
	}
	if methods[protocol.CompactSummary] == 0 || methods[protocol.CompactStub] == 0 || summaries != methods[protocol.CompactSummary] {
		t.Errorf("compactions by method %v, %d summary calls", methods, summaries)
	}
	t.Logf("200 turns: %d model calls (%d summaries), %d compactions %v", len(reqs), summaries, compactions, methods)
}

// firstCall returns the requests of a turn up to its first model call:
// the summary calls of a compaction before it, and the call.
func firstCall(reqs []model.Request) []model.Request {
	for i, r := range reqs {
		if r.Task == "" {
			return reqs[:i+1]
		}
	}
	return reqs
}

// copyStore copies a live SQLite database consistently (VACUUM INTO).
func copyStore(t *testing.T, from, to string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+from+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("VACUUM INTO ?", to); err != nil {
		t.Fatal(err)
	}
}

// allMessages pages through GET /sessions/{id}/messages, oldest first.
func allMessages(t *testing.T, h *servertest.Harness, sid string) []message.Message {
	t.Helper()
	var out []message.Message
	before := ""
	for {
		var page struct {
			Messages []message.Message `json:"messages"`
			HasMore  bool              `json:"has_more"`
		}
		path := "/sessions/" + sid + "/messages?limit=500"
		if before != "" {
			path += "&before=" + before
		}
		if st := h.Do("GET", path, nil, &page); st != 200 {
			t.Fatalf("messages: %d", st)
		}
		out = append(page.Messages, out...)
		if !page.HasMore {
			return out
		}
		before = page.Messages[0].ID
	}
}
