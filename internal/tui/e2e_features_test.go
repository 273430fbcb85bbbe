package tui

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestKeysCommandsAndApprovalsInTmux drives the real program in tmux
// against `metis serve`, as a newcomer would: the keys on the bottom line
// at 120 columns, the help, a command that asks for approval and fails,
// a running command's live output, the server's title in the header,
// an edit's diff after shift+tab to accept_edits, esc cancelling a turn,
// /new and the session picker, then quitting and `--continue`.
func TestKeysCommandsAndApprovalsInTmux(t *testing.T) {
	e := newE2E(t)
	dir, metis, home, ws, addr, self := e.dir, e.metis, e.home, e.ws, e.addr, e.self
	srv := startServe(t, metis, addr, home, filepath.Join(dir, "serve.log"))
	defer stopServe(t, srv)

	tm := &tmux{t: t, bin: e.tmuxBin, sock: filepath.Join(dir, "tmux.sock")}
	tui := func(tm *tmux, args string) {
		tm.run("new-session", "-d", "-s", "tui", "-x", "120", "-y", "50", "-c", ws,
			fmt.Sprintf("env %s=1 %s --server %s %s; sleep 60", mainEnv, shq(self), shq("http://"+addr), args))
	}
	tui(tm, "")
	t.Cleanup(func() { _ = tm.cmd("kill-server").Run() })
	scr := tm.waitFor("the session to attach", func(s string) bool { return strings.Contains(s, "idle ·") })
	lines := strings.Split(strings.TrimRight(scr, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, keyHints) {
		t.Fatalf("the bottom line does not start with the keys:\n%s", scr)
	}
	firstID := regexp.MustCompile(`sess_[0-9A-Z]+`).FindString(lines[0])

	// ? opens the help; esc closes it.
	tm.keys("?")
	tm.waitFor("the help", func(s string) bool { return strings.Contains(s, "metis — help") && strings.Contains(s, "/sessions") })
	tm.keys("Escape")
	tm.waitFor("the help to close", func(s string) bool { return !strings.Contains(s, "metis — help") })

	// A command asks first; y allows it; its non-zero exit is a failure.
	tm.keys("-l", `/tool shell {"command": "echo oops; exit 3"}`)
	tm.keys("Enter")
	tm.waitFor("the approval prompt", func(s string) bool {
		return strings.Contains(s, "shell waits for your approval") && strings.Contains(s, "⏸ waiting for you") &&
			strings.Contains(s, "$ echo oops; exit 3")
	})
	tm.keys("y")
	scr = tm.waitFor("the failed command", func(s string) bool { return strings.Contains(s, "✗ exit 3 in") && strings.Contains(s, "idle ·") })
	if strings.Contains(scr, "✓ exit 3") || strings.Contains(scr, "waits for your approval") {
		t.Fatalf("after the answer:\n%s", scr)
	}
	if !regexp.MustCompile(`✓ done in [0-9.]+m?s · `).MatchString(scr) {
		t.Fatalf("no turn totals:\n%s", scr)
	}
	if header := strings.SplitN(scr, "\n", 2)[0]; strings.Contains(header, "/tool shell") {
		t.Fatalf("the header's title is the raw prompt, not the server's: %q", header)
	}

	// A running command's last lines show on its card, then its result.
	tm.keys("-l", `/tool shell {"command":"for i in 1 2 3; do echo live $i; sleep 1; done"}`)
	tm.keys("Enter")
	tm.waitFor("the approval prompt", func(s string) bool { return strings.Contains(s, "shell waits for your approval") })
	tm.keys("y")
	tm.waitFor("the live output", func(s string) bool { return strings.Contains(s, "⋯ running") && strings.Contains(s, "    live 1") })
	scr = tm.waitFor("the command's result", func(s string) bool { return strings.Contains(s, "✓ exit 0 in") && strings.Contains(s, "idle ·") })
	if strings.Contains(scr, "⋯ running") || strings.Contains(scr, "    live 3") {
		t.Fatalf("the live output outlived the command:\n%s", scr)
	}

	// shift+tab: accept_edits; a write runs unasked and shows its diff.
	tm.keys("BTab")
	tm.waitFor("mode accept_edits", func(s string) bool { return strings.Contains(s, "mode accept_edits") })
	tm.keys("-l", `/tool write_file {"path": "hello.txt", "content": "hi\nthere\n"}`)
	tm.keys("Enter")
	tm.waitFor("the diff", func(s string) bool {
		return strings.Contains(s, "+++ b/hello.txt") && strings.Contains(s, "+there") && strings.Contains(s, "idle ·")
	})

	// Esc cancels a streaming turn.
	tm.keys("-l", "/long 2000")
	tm.keys("Enter")
	tm.waitFor("the stream", func(s string) bool { return strings.Contains(s, "Sentence 5 of 2000.") })
	tm.keys("Escape")
	tm.waitFor("the cancel", func(s string) bool {
		return strings.Contains(s, "■ cancelled after") && strings.Contains(s, "idle ·")
	})

	// /new switches to a new session; /sessions lists both, this one
	// first; enter on the other goes back to it.
	tm.keys("-l", "/new")
	tm.keys("Enter")
	tm.waitFor("a new session", func(s string) bool {
		return strings.Contains(s, "No messages yet") && !strings.Contains(strings.SplitN(s, "\n", 2)[0], firstID)
	})
	tm.keys("-l", "/echo second session")
	tm.keys("Enter")
	tm.waitFor("its answer", func(s string) bool { return strings.Contains(s, "✓ done in") })
	tm.keys("-l", "/sessions")
	tm.keys("Enter")
	scr = tm.waitFor("the picker", func(s string) bool { return strings.Contains(s, "↑↓ choose") && strings.Contains(s, firstID) })
	// The server's title (the prompt without its command) in the header
	// and the picker alike.
	if i, j := strings.Index(scr, "● second session —"), strings.Index(scr, firstID); i < 0 || j < i ||
		!strings.HasPrefix(scr, "metis · second session · ") {
		t.Fatalf("the picker:\n%s", scr)
	}
	tm.keys("Down")
	tm.keys("Enter")
	tm.waitFor("the first session again", func(s string) bool {
		return strings.Contains(strings.SplitN(s, "\n", 2)[0], firstID) && strings.Contains(s, "hello.txt")
	})

	tm.keys("-l", "/echo back in the first")
	tm.keys("Enter")
	tm.waitFor("its answer", func(s string) bool {
		return strings.Count(s, "back in the first") == 2 && strings.Contains(s, "idle ·")
	})

	// /quit; --continue resumes the session active last.
	tm.keys("-l", "/quit")
	tm.keys("Enter")
	tm.waitFor("the exit line", func(s string) bool { return strings.Contains(s, "resume with: metis --session") })
	_ = tm.cmd("kill-server").Run()
	tm = &tmux{t: t, bin: e.tmuxBin, sock: filepath.Join(dir, "tmux2.sock")}
	tui(tm, "--continue")
	t.Cleanup(func() { _ = tm.cmd("kill-server").Run() })
	tm.waitFor("the resumed session", func(s string) bool {
		return strings.Contains(strings.SplitN(s, "\n", 2)[0], firstID) && strings.Contains(s, "back in the first") &&
			strings.Contains(s, "idle ·")
	})
}
