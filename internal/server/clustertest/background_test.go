package clustertest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// TestBackgroundCommandsOfAKilledOwnerAreReportedEnded: a background
// command runs on the node that owns its session's tree; when that node
// is killed (SIGKILL: nothing released, no event of its own), the
// command stops with it (its lifeline), and another node takes the
// tree over although no turn was open and no client follows it there
// (the projection shows the command running), and reports the end:
// tool.background_exited, reason owner_lost, in the log; the summary
// lists nothing running.
func TestBackgroundCommandsOfAKilledOwnerAreReportedEnded(t *testing.T) {
	url := startNATS(t)
	a := startProcNode(t, url, "node-a", failoverTTL, time.Millisecond)
	b := failoverNode(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)

	cmd, _ := json.Marshal(map[string]any{"command": "echo $$ > bg.pid; exec sleep 300", "background": true})
	turn := a.Submit(sid, "/tool shell "+string(cmd))
	pidFile := filepath.Join(a.Workspace, "bg.pid")
	var pid int
	servertest.WaitFor(t, "the command's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	var started string
	ended := false // the turn, so that no turn is left open
	servertest.WaitFor(t, "tool.background_started and turn.completed in the log", func() bool {
		for _, e := range logEvents(t, url, sid) {
			switch e.Type {
			case event.ToolBackgroundStarted:
				var p protocol.ToolBackgroundStartedPayload
				_ = json.Unmarshal(e.Payload, &p)
				started = p.BackgroundID
			case event.TurnCompleted:
				ended = ended || e.TurnID == turn
			}
		}
		return started != "" && ended
	})

	a.Kill()
	servertest.WaitFor(t, "the command to stop with its node", func() bool { return syscall.Kill(pid, 0) != nil || zombie(pid) })

	var exited protocol.ToolBackgroundExitedPayload
	deadline := time.Now().Add(60 * time.Second)
	for exited.BackgroundID == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no tool.background_exited for %s in the log; lease held by %q", started, leaseHolder(t, url, sid))
		}
		for _, e := range logEvents(t, url, sid) {
			if e.Type == event.ToolBackgroundExited {
				_ = json.Unmarshal(e.Payload, &exited)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if exited.BackgroundID != started || exited.Reason != protocol.BackgroundOwnerLost || exited.ExitCode != nil ||
		exited.Command == "" || exited.EndedAt.Before(exited.StartedAt) {
		t.Fatalf("tool.background_exited %+v, want %s ended owner_lost", exited, started)
	}
	if holder := leaseHolder(t, url, sid); holder != "node-b" {
		t.Fatalf("the tree's lease is held by %q, want node-b", holder)
	}
	var sum protocol.SessionSummary
	if st := b.Do("GET", "/sessions/"+sid, nil, &sum); st != 200 {
		t.Fatalf("GET the session on node b: %d", st)
	}
	for _, c := range sum.BackgroundCommands {
		if c.Running {
			t.Fatalf("the summary lists %+v running", c)
		}
	}
}

// zombie reports whether pid is a zombie (ended, not reaped yet).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}
