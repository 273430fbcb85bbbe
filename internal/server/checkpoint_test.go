package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// needGit skips a test of checkpoints on a machine without git.
func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: checkpoints need it (scripts/setup.sh installs it)")
	}
}

// wsTree describes the files under dir: content hash, executable bit,
// symlink target; directories holding nothing are left out.
func wsTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[rel] = hex.EncodeToString(sum[:6]) + map[bool]string{true: " x", false: ""}[fi.Mode()&0o100 != 0]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(a, b map[string]string) string {
	var diffs []string
	for k, v := range a {
		if b[k] != v {
			diffs = append(diffs, k+": "+v+" vs "+b[k])
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, k+": (none) vs "+v)
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "\n")
}

// runTurn runs a turn to its end and returns its id.
func runTurn(h *servertest.Harness, sid, content string) string {
	h.T.Helper()
	id := h.Submit(sid, content)
	h.WaitTurn(sid)
	return id
}

func turnsOf(t *testing.T, h *servertest.Harness, sid string) protocol.TurnList {
	t.Helper()
	var l protocol.TurnList
	if st := h.Do("GET", "/sessions/"+sid+"/turns", nil, &l); st != http.StatusOK {
		t.Fatalf("GET turns: %d", st)
	}
	return l
}

func errCode(t *testing.T, h *servertest.Harness, method, path string, body any) (int, string) {
	t.Helper()
	var e protocol.HTTPError
	st := h.Do(method, path, body, &e)
	return st, e.Error.Code
}

// TestRevertOverBothTransports: a turn's files are put back as they
// were before it began, later turns' changes included (contract §11:
// 202, workspace.reverted reaching every client), with the warning
// clients show; the revert is undone by restoring its undo checkpoint,
// which brings the files back as they were after the last turn.
func TestRevertOverBothTransports(t *testing.T) {
	needGit(t)
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		h := servertest.Start(t, "")
		sid := h.CreateSession()
		// workspace.changed is not in preset:chat (the pinned cancel
		// sequences of that preset end tool.failed, turn.cancelled).
		filter := protocol.Filter{EventTypes: []string{string(event.TurnCompleted), string(event.WorkspaceChanged), string(event.WorkspaceReverted)}}
		c, _, _ := streamtest.Subscribe(t, tr, h.URL, sid, wait, filter, nil, false)
		before := wsTree(t, h.Workspace)
		t1 := runTurn(h, sid, toolCmd("write_file", map[string]string{"path": "README.md", "content": "rewritten\n"}))
		runTurn(h, sid, toolCmd("shell", map[string]string{"command": "mkdir -p d/e && echo new > d/e/n.txt && chmod +x main.go && rm src/.keep 2>/dev/null; true"}))
		after := wsTree(t, h.Workspace)
		if sameTree(before, after) == "" {
			t.Fatal("the turns changed nothing")
		}
		list := turnsOf(t, h, sid)
		if len(list.Turns) != 2 || list.Turns[0].CheckpointID == nil || list.Turns[0].Changes == nil ||
			list.Turns[0].Changes.FilesChanged != 1 || !list.Turns[0].Revertible || !list.Checkpoints.Enabled {
			t.Fatalf("turns %+v", list)
		}
		if ch := list.Turns[1].Changes; ch == nil || ch.FilesChanged != 2 {
			t.Fatalf("the shell turn's changes %+v", ch)
		}

		var res protocol.RevertResult
		if st := h.Do("POST", "/sessions/"+sid+"/turns/"+t1+"/revert", nil, &res); st != http.StatusAccepted {
			t.Fatalf("revert: %d", st)
		}
		if d := sameTree(before, wsTree(t, h.Workspace)); d != "" {
			t.Fatalf("after the revert the files differ from before the turn:\n%s", d)
		}
		if res.Warning != protocol.RevertWarning || res.UndoCheckpointID == "" || res.TurnID != t1 || res.Trigger != protocol.RevertTurn ||
			strings.Join(res.Removed, ",") != "d/e/n.txt" {
			t.Fatalf("revert answer %+v", res)
		}
		evs := c.Events(wait, streamtest.UntilType(event.WorkspaceReverted, ""))
		got := streamtest.PayloadOf[protocol.RevertResult](t, evs[len(evs)-1])
		if got.UndoCheckpointID != res.UndoCheckpointID || got.CheckpointID != *list.Turns[0].CheckpointID || evs[len(evs)-1].TurnID != nil {
			t.Fatalf("workspace.reverted %+v (turn_id %v), answer %+v", got, evs[len(evs)-1].TurnID, res)
		}
		if n := streamtest.CountType(evs, event.WorkspaceChanged); n != 2 {
			t.Errorf("workspace.changed seen %d times, want once per turn", n)
		}

		var undo protocol.RevertResult
		if st := h.Do("POST", "/sessions/"+sid+"/checkpoints/"+res.UndoCheckpointID+"/restore", nil, &undo); st != http.StatusAccepted {
			t.Fatalf("undo: %d", st)
		}
		if d := sameTree(after, wsTree(t, h.Workspace)); d != "" {
			t.Fatalf("after undoing the revert the files differ from after the turns:\n%s", d)
		}
		evs = c.Events(wait, streamtest.UntilType(event.WorkspaceReverted, ""))
		if p := streamtest.PayloadOf[protocol.RevertResult](t, evs[len(evs)-1]); p.Trigger != protocol.RevertUndo || p.CheckpointID != res.UndoCheckpointID {
			t.Fatalf("undo's workspace.reverted %+v", p)
		}
	})
}

// TestRevertRefusals: a turn that changed nothing, another session's
// turn, a revert while a turn runs, a second revert with nothing left
// to put back, and an unknown checkpoint each get their clear error.
func TestRevertRefusals(t *testing.T) {
	needGit(t)
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	other := h.CreateSession()
	chat := runTurn(h, sid, "hello there") // list_dir only: no checkpoint
	write := runTurn(h, sid, toolCmd("write_file", map[string]string{"path": "a.txt", "content": "a\n"}))
	otherTurn := runTurn(h, other, toolCmd("write_file", map[string]string{"path": "b.txt", "content": "b\n"}))

	if st, code := errCode(t, h, "POST", "/sessions/"+sid+"/turns/"+chat+"/revert", nil); st != http.StatusConflict || code != protocol.CodeNothingToRevert {
		t.Errorf("revert of a turn that changed nothing: %d %s", st, code)
	}
	if st, code := errCode(t, h, "POST", "/sessions/"+sid+"/turns/"+otherTurn+"/revert", nil); st != http.StatusNotFound || code != protocol.CodeTurnNotFound {
		t.Errorf("revert of another session's turn: %d %s", st, code)
	}
	if st, code := errCode(t, h, "POST", "/sessions/sess_nope/turns/"+write+"/revert", nil); st != http.StatusNotFound || code != protocol.CodeSessionNotFound {
		t.Errorf("revert in an unknown session: %d %s", st, code)
	}
	if st, code := errCode(t, h, "POST", "/sessions/"+sid+"/turns/"+write+"/revert", map[string]any{"x": []int{1}}); st != http.StatusAccepted {
		t.Errorf("revert with a body: %d %s", st, code)
	}
	if st, code := errCode(t, h, "POST", "/sessions/"+sid+"/turns/"+write+"/revert", nil); st != http.StatusConflict || code != protocol.CodeNothingToRevert {
		t.Errorf("a second revert: %d %s", st, code)
	}
	if st, code := errCode(t, h, "POST", "/sessions/"+sid+"/checkpoints/ckpt_01M8GQJ6ES2P9CJH7E8ZSP6S2W/restore", nil); st != http.StatusNotFound || code != protocol.CodeCheckpointNotFound {
		t.Errorf("restore of an unknown checkpoint: %d %s", st, code)
	}
	if st, code := errCode(t, h, "POST", "/sessions/"+sid+"/checkpoints/../restore", nil); st == http.StatusAccepted {
		t.Errorf("restore of a bad id: %d %s", st, code)
	}

	// While a turn runs, in this session or another on the workspace.
	running := h.Submit(sid, toolCmd("shell", map[string]any{"command": "touch started; sleep 30"}))
	waitFile(t, filepath.Join(h.Workspace, "started"))
	if st, code := errCode(t, h, "POST", "/sessions/"+sid+"/turns/"+write+"/revert", nil); st != http.StatusConflict || code != protocol.CodeTurnInFlight {
		t.Errorf("revert while a turn runs: %d %s", st, code)
	}
	if st, code := errCode(t, h, "POST", "/sessions/"+other+"/turns/"+otherTurn+"/revert", nil); st != http.StatusConflict || code != protocol.CodeTurnInFlight {
		t.Errorf("revert while another session's turn runs on the workspace: %d %s", st, code)
	}
	if st := h.Do("POST", "/sessions/"+sid+"/turns/"+running+"/cancel", nil, nil); st != http.StatusAccepted {
		t.Fatalf("cancel: %d", st)
	}
	h.WaitTurn(sid)
}

// TestCheckpointsOffOrWithoutGit: with checkpoints turned off a turn
// takes none and says nothing; without git each turn that may change
// files says so (workspace.checkpoint_failed), the listing says why,
// and a revert answers checkpoints_unavailable.
func TestCheckpointsOffOrWithoutGit(t *testing.T) {
	for name, opt := range map[string]servertest.Option{
		"off":    func(c *config.Config) { c.CheckpointsOn = false },
		"no git": func(c *config.Config) { c.CheckpointGit = "/nonexistent/git" },
	} {
		t.Run(name, func(t *testing.T) {
			h := servertest.Start(t, "", opt)
			sid := h.CreateSession()
			c := attach(t, h, sid)
			turn := h.Submit(sid, toolCmd("write_file", map[string]string{"path": "a.txt", "content": "a\n"}))
			evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
			h.WaitTurn(sid)
			failed := find(evs, event.WorkspaceCheckpointFailed)
			if name == "off" && len(failed) != 0 || name == "no git" && len(failed) != 1 {
				t.Fatalf("workspace.checkpoint_failed %d times", len(failed))
			}
			if name == "no git" {
				p := payloadOf(t, failed[0])
				if p["error_class"] != protocol.ClassCheckpointsUnavailable || !strings.Contains(p["message"].(string), "git") {
					t.Fatalf("payload %v", p)
				}
			}
			list := turnsOf(t, h, sid)
			if list.Checkpoints.Enabled || list.Checkpoints.Reason == "" || list.Turns[0].Revertible || list.Turns[0].CheckpointID != nil {
				t.Fatalf("listing %+v", list)
			}
			if st, code := errCode(t, h, "POST", "/sessions/"+sid+"/turns/"+turn+"/revert", nil); st != http.StatusConflict || code != protocol.CodeCheckpointsUnavailable {
				t.Fatalf("revert: %d %s", st, code)
			}
		})
	}
}

// TestRevertOfAPlannerTurnCoversItsWorkers: a worker's changes are in
// the planner's workspace, after the checkpoint the planner's delegate
// call took: reverting the planner's turn removes them. The worker's
// own turn took no checkpoint.
func TestRevertOfAPlannerTurnCoversItsWorkers(t *testing.T) {
	needGit(t)
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	before := wsTree(t, h.Workspace)
	turn := runTurn(h, sid, streamtest.DelegateCmd(toolCmd("write_file", map[string]string{"path": "worker.txt", "content": "from the worker\n"})))
	if _, err := os.Stat(filepath.Join(h.Workspace, "worker.txt")); err != nil {
		t.Fatalf("the worker wrote nothing: %v", err)
	}
	list := turnsOf(t, h, sid)
	if ch := list.Turns[0].Changes; ch == nil || len(ch.Files) != 1 || ch.Files[0].Path != "worker.txt" {
		t.Fatalf("the planner's changes %+v", ch)
	}
	var sessions protocol.SessionList
	h.Do("GET", "/sessions", nil, &sessions)
	for _, s := range sessions.Sessions {
		if s.ParentSessionID != nil {
			if wl := turnsOf(t, h, s.ID); len(wl.Turns) != 1 || wl.Turns[0].CheckpointID != nil {
				t.Fatalf("the worker's turns %+v", wl)
			}
		}
	}
	if st := h.Do("POST", "/sessions/"+sid+"/turns/"+turn+"/revert", nil, nil); st != http.StatusAccepted {
		t.Fatalf("revert: %d", st)
	}
	if d := sameTree(before, wsTree(t, h.Workspace)); d != "" {
		t.Fatalf("the worker's file survived the revert:\n%s", d)
	}
}

// TestTurnChangesListsDiffs: GET .../turns/{turn_id}/changes gives
// each changed file with its unified diff; a turn without checkpoints
// has none.
func TestTurnChangesListsDiffs(t *testing.T) {
	needGit(t)
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	chat := runTurn(h, sid, "hello")
	turn := runTurn(h, sid, toolCmd("write_file", map[string]string{"path": "main.go", "content": "package main\n"}))
	var d protocol.TurnDiff
	if st := h.Do("GET", "/sessions/"+sid+"/turns/"+turn+"/changes", nil, &d); st != http.StatusOK {
		t.Fatalf("changes: %d", st)
	}
	if len(d.Files) != 1 || d.Files[0].Path != "main.go" || d.Files[0].Status != protocol.FileModified ||
		!strings.Contains(d.Files[0].Diff, "-content of main.go\n+package main\n") {
		t.Fatalf("changes %+v", d)
	}
	if st := h.Do("GET", "/sessions/"+sid+"/turns/"+chat+"/changes", nil, &d); st != http.StatusOK || len(d.Files) != 0 || d.CheckpointID != "" {
		t.Fatalf("changes of a chat turn: %d %+v", st, d)
	}
	if st, code := errCode(t, h, "GET", "/sessions/"+sid+"/turns/turn_nope/changes", nil); st != http.StatusNotFound || code != protocol.CodeTurnNotFound {
		t.Fatalf("changes of an unknown turn: %d %s", st, code)
	}
	if st, code := errCode(t, h, "GET", "/sessions/"+sid+"/turns?limit=0", nil); st != http.StatusBadRequest || code != protocol.CodeInvalidRequest {
		t.Fatalf("limit=0: %d %s", st, code)
	}
}

// waitFile waits for a file to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for range 400 {
		if _, err := os.Stat(path); err == nil {
			return
		}
		sleep()
	}
	t.Fatalf("%s never appeared", path)
}

func sleep() { time.Sleep(25 * time.Millisecond) }

// TestGoClientRevertAndFork: the Go client's methods reach every
// endpoint of checkpoints, revert and fork, and tell nothing_to_revert
// apart.
func TestGoClientRevertAndFork(t *testing.T) {
	needGit(t)
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	before := wsTree(t, h.Workspace)
	chat := runTurn(h, sid, "hello")
	turn := runTurn(h, sid, toolCmd("write_file", map[string]string{"path": "c.txt", "content": "c\n"}))
	c := client.New(h.URL)
	c.Token = h.Token
	ctx := t.Context()

	list, err := c.Turns(ctx, sid, "", 1)
	if err != nil || len(list.Turns) != 1 || list.Turns[0].TurnID != turn || !list.HasMore || list.Next != turn {
		t.Fatalf("Turns(limit 1) = %+v, %v", list, err)
	}
	if older, err := c.Turns(ctx, sid, list.Next, 0); err != nil || len(older.Turns) != 1 || older.Turns[0].TurnID != chat {
		t.Fatalf("Turns(before %s) = %+v, %v", list.Next, older, err)
	}
	d, err := c.TurnChanges(ctx, sid, turn)
	if err != nil || len(d.Files) != 1 || d.Files[0].Status != protocol.FileAdded || !strings.Contains(d.Files[0].Diff, "+c\n") {
		t.Fatalf("TurnChanges = %+v, %v", d, err)
	}
	if _, err := c.Revert(ctx, sid, chat); !client.IsNothingToRevert(err) {
		t.Fatalf("Revert of a chat turn: %v", err)
	}
	res, err := c.Revert(ctx, sid, turn)
	if err != nil || res.Warning == "" || sameTree(before, wsTree(t, h.Workspace)) != "" {
		t.Fatalf("Revert = %+v, %v", res, err)
	}
	if _, err := c.RestoreCheckpoint(ctx, sid, res.UndoCheckpointID); err != nil {
		t.Fatalf("RestoreCheckpoint: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.Workspace, "c.txt")); err != nil {
		t.Fatalf("the undo did not bring c.txt back: %v", err)
	}
	f, err := c.Fork(ctx, sid, client.ForkRequest{})
	if err != nil || f.ForkedFrom == nil || f.ForkedFrom.SessionID != sid {
		t.Fatalf("Fork = %+v, %v", f, err)
	}
}

// TestEveryToolThatChangesFilesTakesACheckpoint: a turn's first call of
// write_file, edit_file, apply_patch or shell takes a checkpoint first
// (workspace.checkpointed names the call, and the turn is revertible);
// a turn that only reads (read_file, list_dir, glob, grep) takes none.
func TestEveryToolThatChangesFilesTakesACheckpoint(t *testing.T) {
	needGit(t)
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := attach(t, h, sid)
	for _, tc := range []struct {
		tool  string
		input any
		takes bool
	}{
		{"write_file", map[string]string{"path": "w.txt", "content": "w\n"}, true},
		{"edit_file", map[string]string{"path": "README.md", "old_string": "content", "new_string": "text"}, true},
		{"apply_patch", map[string]string{"patch": "*** Begin Patch\n*** Add File: p.txt\n+p\n*** End Patch\n"}, true},
		{"shell", map[string]string{"command": "echo s > s.txt"}, true},
		{"read_file", map[string]string{"path": "README.md"}, false},
		{"list_dir", map[string]string{"path": "."}, false},
		{"glob", map[string]string{"pattern": "**/*.go"}, false},
		{"grep", map[string]string{"pattern": "content"}, false},
	} {
		turn := h.Submit(sid, toolCmd(tc.tool, tc.input))
		evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
		h.WaitTurn(sid)
		if n := count(evs, event.ToolCompleted); n != 1 {
			t.Fatalf("%s: %d tool.completed, want 1 (%v)", tc.tool, n, types(evs))
		}
		var info *protocol.TurnInfo
		for _, ti := range turnsOf(t, h, sid).Turns {
			if ti.TurnID == turn {
				info = &ti
			}
		}
		if info == nil {
			t.Fatalf("%s: turn %s not listed", tc.tool, turn)
		}
		if tc.takes != (info.CheckpointID != nil) || tc.takes != info.Revertible || tc.takes != (info.Changes != nil) {
			t.Errorf("%s: checkpoint %v, revertible %v, changes %v; want a checkpoint: %v", tc.tool, info.CheckpointID, info.Revertible, info.Changes, tc.takes)
		}
		if !tc.takes {
			continue
		}
		if info.Changes.FilesChanged != 1 {
			t.Errorf("%s: changes %+v, want one file", tc.tool, info.Changes)
		}
		stored, err := h.Server.Store.Events(t.Context(), store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.WorkspaceCheckpointed}})
		if err != nil || len(stored) == 0 || stored[len(stored)-1].TurnID != turn {
			t.Fatalf("%s: workspace.checkpointed %v %v", tc.tool, stored, err)
		}
		p := streamtest.EventPayloadOf[protocol.WorkspaceCheckpointedPayload](t, stored[len(stored)-1])
		if p.CheckpointID != *info.CheckpointID || p.ToolUseID == "" {
			t.Errorf("%s: workspace.checkpointed %+v, turn's checkpoint %s", tc.tool, p, *info.CheckpointID)
		}
	}
}
