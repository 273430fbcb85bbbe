package tui

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/client"
)

// TestJoiningMidAnswerInTmux: `metis --session ID` started while that
// session's answer streams shows the answer from its first sentence
// (the snapshot carries it so far, contract §11), then keeps streaming
// it, each sentence once. Before the snapshot held the message in
// flight, the screen started mid-answer.
func TestJoiningMidAnswerInTmux(t *testing.T) {
	e := newE2E(t)
	dir, metis, home, ws, addr, self := e.dir, e.metis, e.home, e.ws, e.addr, e.self
	srv := startServe(t, metis, addr, home, filepath.Join(dir, "serve.log"))
	defer stopServe(t, srv)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New("http://" + addr)
	s, err := c.CreateSession(ctx, ws, "")
	if err != nil {
		t.Fatal(err)
	}
	turn, err := c.Submit(ctx, s.ID, "/long 300")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Cancel(context.Background(), s.ID, turn, "") }()
	// Let a few sentences stream before the TUI attaches.
	v := client.NewView(nil)
	fctx, stop := context.WithCancel(ctx)
	_ = c.Follow(fctx, s.ID, client.FollowOptions{View: v, OnUpdate: func(u client.Update) {
		if u.Kind == client.EventApplied && strings.Contains(u.View.Messages[len(u.View.Messages)-1].Text(), "Sentence 8 of 300.") {
			stop()
		}
	}})
	stop()

	tm := &tmux{t: t, bin: e.tmuxBin, sock: filepath.Join(dir, "tmux.sock")}
	tm.run("new-session", "-d", "-s", "tui", "-x", "120", "-y", "50", "-c", ws,
		fmt.Sprintf("env %s=1 %s --server %s --session %s", mainEnv, shq(self), shq("http://"+addr), s.ID))
	t.Cleanup(func() { _ = tm.cmd("kill-server").Run() })

	scr := tm.waitFor("the answer so far, then more of it", func(s string) bool {
		return strings.Contains(s, "Sentence 1 of 300.") && strings.Contains(s, "Sentence 20 of 300.")
	})
	for _, n := range []int{1, 8, 9, 20} {
		if k := strings.Count(scr, fmt.Sprintf("Sentence %d of 300.", n)); k != 1 {
			t.Fatalf("sentence %d is shown %d times:\n%s", n, k, scr)
		}
	}
	if strings.Contains(scr, "no longer held") {
		t.Fatalf("the answer's start is said to be missing:\n%s", scr)
	}
}
