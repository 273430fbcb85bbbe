package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestTurnsRevertRestoreFork: `metis turns` lists what a turn changed,
// `metis revert` puts the files back and prints the undo and the
// warning, `metis restore` undoes it, `metis fork` prints the new
// session; a missing argument is a usage error.
func TestTurnsRevertRestoreFork(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: checkpoints need it")
	}
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	turn := h.Submit(sid, `/tool write_file {"path":"cli.txt","content":"x\n"}`)
	h.WaitTurn(sid)
	ctx := context.Background()
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}
	run := func(f func(context.Context, []string, cli.Env) int, args ...string) int {
		out.Reset()
		errOut.Reset()
		return f(ctx, append([]string{"--server", h.URL}, args...), env)
	}

	if code := run(cli.Turns, sid); code != 0 || !strings.Contains(out.String(), turn) || !strings.Contains(out.String(), "cli.txt") {
		t.Fatalf("turns: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if code := run(cli.Revert, sid, turn); code != 0 || !strings.Contains(out.String(), "removed  cli.txt") ||
		!strings.Contains(errOut.String(), "metis restore "+sid+" ckpt_") || !strings.Contains(errOut.String(), "not undone") {
		t.Fatalf("revert: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if _, err := os.Stat(filepath.Join(h.Workspace, "cli.txt")); !os.IsNotExist(err) {
		t.Fatalf("cli.txt after the revert: %v", err)
	}
	undo := strings.Fields(strings.SplitN(errOut.String(), "\n", 2)[0])[4]
	if code := run(cli.Restore, sid, undo); code != 0 {
		t.Fatalf("restore: exit %d\n%s", code, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(h.Workspace, "cli.txt")); err != nil {
		t.Fatalf("cli.txt after the undo: %v", err)
	}
	if code := run(cli.Revert, sid, "turn_nope"); code != 1 || !strings.Contains(errOut.String(), "turn_not_found") {
		t.Fatalf("revert of an unknown turn: exit %d %s", code, errOut.String())
	}
	if code := run(cli.Fork, sid, "--json"); code != 0 {
		t.Fatalf("fork: exit %d %s", code, errOut.String())
	}
	var f struct {
		ID         string `json:"id"`
		ForkedFrom struct {
			SessionID string `json:"session_id"`
		} `json:"forked_from"`
	}
	if err := json.Unmarshal(out.Bytes(), &f); err != nil || f.ID == "" || f.ForkedFrom.SessionID != sid {
		t.Fatalf("fork --json: %v %s", err, out.String())
	}
	if code := run(cli.Revert, sid); code != 2 {
		t.Fatalf("revert without a turn: exit %d", code)
	}
}
