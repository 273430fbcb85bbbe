//go:build linux

package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

var bgIDRe = regexp.MustCompile(`bg_[0-9a-f]{12}`)

// toolTurn runs one /tool turn and returns its events.
func toolTurn(t *testing.T, h *servertest.Harness, c *streamtest.Client, sid, name string, input any) []*protocol.EventEnvelope {
	t.Helper()
	turn := h.Submit(sid, toolCmd(name, input))
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	h.WaitTurn(sid)
	return evs
}

// waitPid waits for a pid file in the workspace.
func waitPid(t *testing.T, h *servertest.Harness, name string) string {
	t.Helper()
	servertest.WaitFor(t, name, func() bool { p, err := readFile(h.Workspace, name); return err == nil && p != "" })
	p, _ := readFile(h.Workspace, name)
	return p
}

// TestBackgroundCommandsThroughTheServer: driven with the demo model,
// shell with background: true answers with an id at once and emits
// tool.background_started before its tool.completed; the session summary
// lists the command; shell_output returns what it printed since the
// last read; a cancelled turn does not stop it; shell_kill stops it and
// tool.background_exited says so; the summary shows it ended.
func TestBackgroundCommandsThroughTheServer(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := attach(t, h, sid)

	evs := toolTurn(t, h, c, sid, "shell", map[string]any{"command": "echo $$ > bg.pid; echo hello; exec sleep 300", "background": true})
	got := types(evs)
	si, ci := slices.Index(got, string(event.ToolBackgroundStarted)), slices.Index(got, string(event.ToolCompleted))
	if si < 0 || ci < 0 || si > ci {
		t.Fatalf("tool.background_started is not before tool.completed: %v", got)
	}
	started := payloadOf(t, evs[si])
	id, _ := started["background_id"].(string)
	if !bgIDRe.MatchString(id) || started["command"] != "echo $$ > bg.pid; echo hello; exec sleep 300" || started["tool_use_id"] == "" {
		t.Fatalf("tool.background_started %v", started)
	}
	if r := payloadOf(t, evs[ci])["result"].(string); !strings.Contains(r, id) {
		t.Fatalf("the result does not give the id: %q", r)
	}
	pid := waitPid(t, h, "bg.pid")
	sum := summaryOf(t, h, sid)
	if len(sum.BackgroundCommands) != 1 || sum.BackgroundCommands[0].ID != id || !sum.BackgroundCommands[0].Running {
		t.Fatalf("summary background_commands %+v", sum.BackgroundCommands)
	}

	// shell_output until "hello" shows, then nothing new.
	servertest.WaitFor(t, "hello", func() bool {
		evs := toolTurn(t, h, c, sid, "shell_output", map[string]any{"id": id})
		return strings.Contains(payloadOf(t, find(evs, event.ToolCompleted)[0])["result"].(string), "hello")
	})
	evs = toolTurn(t, h, c, sid, "shell_output", map[string]any{"id": id})
	if r := payloadOf(t, find(evs, event.ToolCompleted)[0])["result"].(string); !strings.Contains(r, "running") || !strings.Contains(r, "(no new output)") {
		t.Fatalf("a second read %q", r)
	}

	// A cancelled turn does not stop it.
	turn := h.Submit(sid, toolCmd("shell", map[string]any{"command": "echo $$ > fg.pid; exec sleep 300"}))
	waitPid(t, h, "fg.pid")
	c.Send(map[string]any{"type": "cancel", "turn_id": turn, "reason": "user_cancel"})
	c.Events(wait, streamtest.UntilType(event.TurnCancelled, turn))
	h.WaitTurn(sid)
	time.Sleep(100 * time.Millisecond)
	if !processAlive(pid) || !summaryOf(t, h, sid).BackgroundCommands[0].Running {
		t.Fatal("cancelling a turn stopped the background command")
	}

	// Bad input: another session's id is unknown.
	other := h.CreateSession()
	oc := attach(t, h, other)
	evs = toolTurn(t, h, oc, other, "shell_kill", map[string]any{"id": id})
	if f := payloadOf(t, find(evs, event.ToolFailed)[0]); f["error_class"] != "invalid_input" || !strings.Contains(f["message"].(string), "no background command") {
		t.Fatalf("another session's shell_kill: %v", f)
	}
	if !processAlive(pid) {
		t.Fatal("another session stopped the command")
	}

	evs = toolTurn(t, h, c, sid, "shell_kill", map[string]any{"id": id})
	got = types(evs)
	ei, ci := slices.Index(got, string(event.ToolBackgroundExited)), slices.Index(got, string(event.ToolCompleted))
	if ei < 0 || ei > ci {
		t.Fatalf("tool.background_exited is not before shell_kill's tool.completed: %v", got)
	}
	if p := payloadOf(t, evs[ei]); p["background_id"] != id || p["reason"] != protocol.BackgroundKilled || p["exit_code"] != nil {
		t.Fatalf("tool.background_exited %v", p)
	}
	if processAlive(pid) {
		t.Fatal("the command survived shell_kill")
	}
	bc := summaryOf(t, h, sid).BackgroundCommands
	if len(bc) != 1 || bc[0].Running || bc[0].EndReason != protocol.BackgroundKilled || bc[0].EndedAt == nil {
		t.Fatalf("summary after the kill %+v", bc)
	}
	// GET /sessions lists it too, and a session without any has [].
	var list protocol.SessionList
	h.Do("GET", "/sessions", nil, &list)
	for _, s := range list.Sessions {
		if s.BackgroundCommands == nil {
			t.Fatalf("session %s has background_commands null", s.ID)
		}
	}
}

// TestBackgroundCommandsStopWithTheServer: stopping the server stops
// every background command and emits tool.background_exited
// (server_shutdown) first; the package's TestMain checks that no
// goroutine is left.
func TestBackgroundCommandsStopWithTheServer(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	h.Submit(sid, toolCmd("shell", map[string]any{"command": "trap '' TERM; echo $$ > bg.pid; while :; do sleep 0.05; done", "background": true}))
	h.WaitTurn(sid)
	pid := waitPid(t, h, "bg.pid")
	h.Stop()
	if processAlive(pid) {
		t.Fatal("the background command outlived the server")
	}
	var exited map[string]any
	for _, e := range h.Live.Events(sid) {
		if e.Type == event.ToolBackgroundExited {
			servertest.Must(t, json.Unmarshal(e.Payload, &exited))
		}
	}
	if exited["reason"] != protocol.BackgroundServerShutdown {
		t.Fatalf("tool.background_exited %v", exited)
	}
	if _, err := os.Stat(filepath.Join(h.Home, "background")); err == nil {
		ents, _ := os.ReadDir(filepath.Join(h.Home, "background"))
		if len(ents) != 0 {
			t.Fatalf("the ledger still holds %d entries after a clean stop", len(ents))
		}
	}
}

// TestBackgroundCommandsLostInACrashAreReported: a command the ledger
// still lists when the server starts (the previous one died without
// stopping it) gets its tool.background_exited, reason server_lost, and
// leaves the ledger.
func TestBackgroundCommandsLostInACrashAreReported(t *testing.T) {
	home := t.TempDir()
	h := servertest.Start(t, home)
	sid := h.CreateSession()
	h.Stop()
	started := time.Now().Add(-time.Minute).UTC()
	entry, _ := json.Marshal(map[string]any{"session_id": sid, "started": protocol.ToolBackgroundStartedPayload{
		BackgroundID: "bg_0123456789ab", Command: "npm run dev", StartedAt: started}})
	servertest.Must(t, os.MkdirAll(filepath.Join(home, "background"), 0o700))
	servertest.Must(t, os.WriteFile(filepath.Join(home, "background", "bg_0123456789ab.json"), entry, 0o600))

	h2 := servertest.Start(t, home)
	// The report is emitted at start and committed by the store's writer
	// soon after: wait for it, then check there is exactly one.
	var evs []*event.Event
	servertest.WaitFor(t, "tool.background_exited in the store", func() bool {
		var err error
		evs, err = h2.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.ToolBackgroundExited}})
		servertest.Must(t, err)
		return len(evs) > 0
	})
	if len(evs) != 1 {
		t.Fatalf("%d tool.background_exited, want 1", len(evs))
	}
	var p protocol.ToolBackgroundExitedPayload
	servertest.Must(t, json.Unmarshal(evs[0].Payload, &p))
	if p.BackgroundID != "bg_0123456789ab" || p.Reason != protocol.BackgroundServerLost || p.Command != "npm run dev" || p.ExitCode != nil {
		t.Fatalf("payload %+v", p)
	}
	if _, err := os.Stat(filepath.Join(home, "background", "bg_0123456789ab.json")); !os.IsNotExist(err) {
		t.Fatalf("the ledger entry is still there: %v", err)
	}
}

// TestBackgroundCommandsStopWhenTheirSessionIsDeleted: the retention
// deletes an idle session: its background commands stop, another
// session's go on.
func TestBackgroundCommandsStopWhenTheirSessionIsDeleted(t *testing.T) {
	h := servertest.Start(t, "")
	idle, live := h.CreateSession(), h.CreateSession()
	h.Submit(idle, toolCmd("shell", map[string]any{"command": "echo $$ > idle.pid; exec sleep 300", "background": true}))
	h.WaitTurn(idle)
	idlePid := waitPid(t, h, "idle.pid")
	cutoff := time.Now()
	servertest.WaitFor(t, "the clock to pass the cutoff", func() bool { return time.Now().After(cutoff.Add(2 * time.Millisecond)) })
	h.Submit(live, toolCmd("shell", map[string]any{"command": "echo $$ > live.pid; exec sleep 300", "background": true}))
	h.WaitTurn(live)
	livePid := waitPid(t, h, "live.pid")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := h.Server.Prune(ctx, cutoff)
	if err != nil || r.Sessions != 1 {
		t.Fatalf("Prune = %+v, %v", r, err)
	}
	servertest.WaitFor(t, "the idle session's command to stop", func() bool { return !processAlive(idlePid) })
	if !processAlive(livePid) {
		t.Fatal("the live session's command was stopped")
	}
	if l := h.Server.Background.List(idle); len(l) != 0 {
		t.Fatalf("the deleted session still lists %+v", l)
	}
}

// TestBackgroundCommandsStopAtOnceWhenTheirSessionIsDeleted: DELETE
// /sessions/{id} stops the background commands of the session and of
// its workers before it answers (not at the next retention prune); an
// archived session's commands go on (archiving only hides it from the
// list), and so do another session's.
func TestBackgroundCommandsStopAtOnceWhenTheirSessionIsDeleted(t *testing.T) {
	h := servertest.Start(t, "")
	planner, archived := h.CreateSession(), h.CreateSession()
	h.Submit(planner, toolCmd("shell", map[string]any{"command": "echo $$ > planner.pid; exec sleep 300", "background": true}))
	h.WaitTurn(planner)
	worker := toolCmd("shell", map[string]any{"command": "echo $$ > worker.pid; exec sleep 300", "background": true})
	h.Submit(planner, toolCmd("delegate", map[string]string{"task": worker}))
	h.WaitTurn(planner)
	h.Submit(archived, toolCmd("shell", map[string]any{"command": "echo $$ > archived.pid; exec sleep 300", "background": true}))
	h.WaitTurn(archived)
	plannerPid, workerPid, archivedPid := waitPid(t, h, "planner.pid"), waitPid(t, h, "worker.pid"), waitPid(t, h, "archived.pid")
	kids, err := h.Server.Store.Children(context.Background(), planner)
	if err != nil || len(kids) != 1 || len(h.Server.Background.List(kids[0].ID)) != 1 {
		t.Fatalf("the worker %+v (%v) does not run its command", kids, err)
	}

	if st := h.Do("PATCH", "/sessions/"+archived, map[string]any{"archived": true}, nil); st != 200 {
		t.Fatalf("archive: %d", st)
	}
	if st := h.Do("DELETE", "/sessions/"+planner, nil, nil); st != 204 {
		t.Fatalf("DELETE: %d", st)
	}
	for _, sid := range []string{planner, kids[0].ID} {
		if l := h.Server.Background.List(sid); len(l) != 0 {
			t.Fatalf("once DELETE answered, session %s still lists %+v", sid, l)
		}
	}
	servertest.WaitFor(t, "the deleted sessions' processes to be gone", func() bool { return !processAlive(plannerPid) && !processAlive(workerPid) })
	if !processAlive(archivedPid) || len(h.Server.Background.List(archived)) != 1 || !h.Server.Background.List(archived)[0].Running {
		t.Fatal("the archived session's command was stopped")
	}
}
