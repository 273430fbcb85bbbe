package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestLiveTurnAgainstARealServer runs the model against a real server and
// the real Follow, without a terminal: frames are stepped as the feed
// wakes. A turn streams in batches, ctrl-c cancels it.
func TestLiveTurnAgainstARealServer(t *testing.T) {
	srv := servertest.Start(t, "", func(c *config.Config) { c.DemoDelay = time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	c := client.New(srv.URL)
	c.Logger = discardLogger()
	sess, err := c.CreateSession(ctx, srv.Workspace, "")
	if err != nil {
		t.Fatal(err)
	}
	f := newFeed()
	m := newModel(ctx, c, f, options{sessionID: sess.ID, workspace: sess.WorkspacePath})
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 40})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Follow(ctx, sess.ID, client.FollowOptions{Filter: "preset:full", OnUpdate: f.push})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	screen := func() string { return ansi.Strip(m.View().Content) }
	// run executes a command the way Bubble Tea would, feeding its
	// message back.
	run := func(cmd tea.Cmd) {
		if cmd != nil {
			if msg := cmd(); msg != nil {
				m.Update(msg)
			}
		}
	}
	frames := 0
	waitFor := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			select {
			case <-f.wake:
			case <-time.After(50 * time.Millisecond):
			case <-deadline:
				t.Fatalf("timed out waiting for %s:\n%s", what, screen())
			}
			time.Sleep(frameInterval) // let a frame's worth of events pile up
			m.Update(frameMsg{})
			frames++
			if cond(screen()) {
				return
			}
		}
	}
	has := func(s string) func(string) bool { return func(scr string) bool { return strings.Contains(scr, s) } }

	waitFor("the subscription", func(string) bool { return m.subscribed })
	m.composer.SetValue("/long 200")
	run(m.key(enter))
	waitFor("streamed text", has("Sentence 20 of 200."))
	if !strings.Contains(screen(), "writing") {
		t.Fatalf("activity bar while streaming:\n%s", screen())
	}
	run(m.key(ctrlC))
	waitFor("the cancellation", has("(cancelled)"))
	waitFor("idle", has("idle"))
	if strings.Contains(screen(), "Sentence 200 of 200.") {
		t.Fatal("the cancelled turn ran to its end")
	}
	if m.events.total <= m.renders {
		t.Fatalf("%d events caused %d renders: deltas are not batched", m.events.total, m.renders)
	}
	t.Logf("%d events, %d frames, %d renders", m.events.total, frames, m.renders)
}
