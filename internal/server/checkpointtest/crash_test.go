package checkpointtest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// TestRevertAfterACrashBetweenCheckpointAndTurnEnd: the server is
// killed (SIGKILL) while a turn's command runs, after the checkpoint
// the turn took before it and the changes the command made. After a
// restart the turn is closed by recovery, still has its checkpoint (and
// no changes listed, since it never ended), and reverting it puts the
// files back as they were before it.
func TestRevertAfterACrashBetweenCheckpointAndTurnEnd(t *testing.T) {
	needGit(t)
	home := t.TempDir()
	ws := filepath.Join(home, "workspace")
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"README.md", "src/main.go"} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte("content of "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := tree(t, ws)

	c := startChild(t, home)
	var s protocol.SessionSummary
	if st := do(t, c.URL, "POST", "/sessions", map[string]string{"workspace_path": ws}, &s); st != http.StatusCreated {
		t.Fatalf("create session: %d", st)
	}
	pidFile := filepath.Join(ws, "sleeper.pid")
	cmd := "echo lost > crash.txt && echo changed >> README.md && rm src/main.go && echo $$ > sleeper.pid && exec sleep 60"
	var started struct {
		TurnID string `json:"turn_id"`
	}
	if st := do(t, c.URL, "POST", "/sessions/"+s.ID+"/turns", map[string]string{"content": toolCmd("shell", map[string]string{"command": cmd})}, &started); st != http.StatusAccepted {
		t.Fatalf("submit: %d", st)
	}
	pid := waitPid(t, pidFile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	c.Kill()

	c2 := startChild(t, home)
	list := turns(t, c2.URL, s.ID)
	if len(list.Turns) != 1 {
		t.Fatalf("turns after the restart: %+v", list)
	}
	tu := list.Turns[0]
	if tu.TurnID != started.TurnID || tu.Status != "cancelled" || tu.CheckpointID == nil || tu.AfterCheckpointID != nil ||
		tu.Changes != nil || !tu.Revertible {
		t.Fatalf("the crashed turn after the restart: %+v", tu)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL) // the command outlived the server: it is not part of the files
	var res protocol.RevertResult
	if st := do(t, c2.URL, "POST", "/sessions/"+s.ID+"/turns/"+tu.TurnID+"/revert", nil, &res); st != http.StatusAccepted {
		t.Fatalf("revert: %d %+v", st, res)
	}
	if d := treeDiff(before, tree(t, ws)); d != "" {
		t.Fatalf("after the revert the files differ from before the crashed turn:\n%s\nrevert: %+v", d, res)
	}
}

// waitPid waits for a command to write its pid to path.
func waitPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s was never written", path)
	return 0
}
