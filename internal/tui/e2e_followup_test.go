package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFollowUpsImagesUndoAndServersInTmux drives the real program at 80
// columns against `metis serve` with a broken MCP server configured: the
// status line's MCP mark, the model picker from GET /models, enter
// queueing behind a running turn and /unqueue, ctrl+s steering into a
// turn, /image, /undo's question and its revert then nothing_to_revert,
// /rewind into a copy with the prompt in its composer,
// and a background command listed by /bg.
func TestFollowUpsImagesUndoAndServersInTmux(t *testing.T) {
	e := newE2E(t)
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.home, "config.yaml"), []byte("mcp_servers:\n  broken: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, e.metis, e.addr, e.home, filepath.Join(e.dir, "serve.log"))
	defer stopServe(t, srv)
	tm := &tmux{t: t, bin: e.tmuxBin, sock: filepath.Join(e.dir, "tmux.sock")}
	tm.run("new-session", "-d", "-s", "tui", "-x", "80", "-y", "40", "-c", e.ws,
		fmt.Sprintf("env %s=1 %s --server %s; sleep 60", mainEnv, shq(e.self), shq("http://"+e.addr)))
	t.Cleanup(func() { _ = tm.cmd("kill-server").Run() })
	send := func(text string) {
		tm.keys("-l", text)
		tm.keys("Enter")
	}
	idle := func(s string) bool { return strings.Contains(s, "idle ·") }

	// An invalid MCP entry is a server down.
	tm.waitFor("the MCP mark", func(s string) bool { return idle(s) && strings.Contains(s, "⚠ mcp: 1 down (/mcp)") })
	send("/mcp")
	tm.waitFor("the MCP sheet", func(s string) bool { return strings.Contains(s, "✗ broken · - · invalid") })
	tm.keys("Escape")
	tm.waitFor("the sheet to close", func(s string) bool { return !strings.Contains(s, "MCP servers") })

	// /model lists GET /models.
	send("/model")
	tm.waitFor("the model picker", func(s string) bool {
		return strings.Contains(s, "builtin:demo (the server's default") && strings.Contains(s, "not available here:")
	})
	tm.keys("Escape")
	tm.waitFor("the picker to close", func(s string) bool { return !strings.Contains(s, "not available here:") })
	send("/mode auto")
	tm.waitFor("mode auto", func(s string) bool { return strings.Contains(s, "mode auto") })

	// Enter while a turn runs queues; /unqueue takes one out; the queue
	// runs once the turn ends (here, cancelled).
	send("/long 300")
	tm.waitFor("the stream", func(s string) bool { return strings.Contains(s, "Sentence 3 of 300.") })
	send("/echo after the long one")
	tm.waitFor("the queued message", func(s string) bool { return strings.Contains(s, "⧗ 1 queued: /echo after the long one") })
	send("/echo dropped")
	tm.waitFor("the second", func(s string) bool { return strings.Contains(s, "⧗ 2 queued: /echo dropped") })
	send("/unqueue 2")
	tm.waitFor("the second to go", func(s string) bool {
		return !strings.Contains(s, "⧗ 2 queued") && strings.Contains(s, "taken out of the queue")
	})
	tm.keys("Escape")
	scr := tm.waitFor("the queued turn to run", func(s string) bool {
		return idle(s) && strings.Count(s, "after the long one") == 2 && !strings.Contains(s, "queued:")
	})
	if strings.Contains(scr, "› /echo dropped") {
		t.Fatalf("the message taken out of the queue ran:\n%s", scr)
	}

	// ctrl+s steers into a turn between its model calls.
	send(`/tool shell {"command": "sleep 2; echo slept"}`)
	tm.waitFor("the command", func(s string) bool { return strings.Contains(s, "$ sleep 2; echo slept") })
	tm.keys("-l", "also say hi")
	tm.keys("C-s")
	tm.waitFor("the steered message", func(s string) bool {
		return idle(s) && strings.Contains(s, "↪ steered into the running turn") && strings.Contains(s, `with "also say hi"`)
	})

	// /image attaches a picture to the next message.
	writePNG(t, e.ws, 40, 30)
	send("/image shot.png")
	tm.waitFor("the chip", func(s string) bool { return strings.Contains(s, "attached: [image: shot.png") })
	send("what is this?")
	tm.waitFor("the image placeholder", func(s string) bool {
		return idle(s) && strings.Contains(s, "[image: shot.png 40×30") && strings.Contains(s, "I see 1 image")
	})

	// /undo asks, showing what it puts back, then reverts; a second
	// /undo has nothing to revert.
	send(`/tool write_file {"path": "hello.txt", "content": "hi\n"}`)
	tm.waitFor("the change", func(s string) bool { return idle(s) && strings.Contains(s, "✎ this turn changed 1 file") })
	hello := filepath.Join(e.ws, "hello.txt")
	if _, err := os.Stat(hello); err != nil {
		t.Fatal(err)
	}
	send("/undo")
	tm.waitFor("the question", func(s string) bool {
		return strings.Contains(s, "y or enter reverts") && strings.Contains(s, "A hello.txt (+1 −0)") && strings.Contains(s, "Only the workspace's files")
	})
	tm.keys("y")
	tm.waitFor("the revert", func(s string) bool { return strings.Contains(s, "↶ files put back") })
	if _, err := os.Stat(hello); !os.IsNotExist(err) {
		t.Fatalf("hello.txt after /undo: %v", err)
	}
	send("/undo")
	tm.waitFor("the question again", func(s string) bool { return strings.Contains(s, "y or enter reverts") })
	tm.keys("y")
	tm.waitFor("nothing to revert", func(s string) bool { return strings.Contains(s, "nothing to revert: the files already are") })

	// A background command is listed.
	send(`/tool shell {"command": "sleep 30", "background": true}`)
	tm.waitFor("the background command", func(s string) bool {
		return idle(s) && strings.Contains(s, "⚙ background bg_") && strings.Contains(s, "bg 1 running (/bg)")
	})
	send("/bg")
	tm.waitFor("the /bg sheet", func(s string) bool {
		return strings.Contains(s, "running, started") && strings.Contains(s, "$ sleep 30")
	})
	tm.keys("Escape")
	tm.waitFor("the sheet to close", func(s string) bool { return !strings.Contains(s, "running, started") })

	// /rewind goes back to before the write_file prompt, files too (the
	// /undo above already put them back), and opens the copy with that
	// prompt in the composer.
	send("/rewind")
	tm.waitFor("the prompts", func(s string) bool {
		return strings.Contains(s, "rewind to before a prompt") && strings.Contains(s, ` 2  › /tool write_file {"path": "hello.txt"`)
	})
	tm.keys("Down")
	tm.keys("f")
	tm.waitFor("the copy with the prompt in its composer", func(s string) bool {
		return strings.Contains(s, "rewound; the files already were") &&
			strings.Contains(s, `│ /tool write_file {"path": "hello.txt"`) && !strings.Contains(s, "$ sleep 30")
	})
}
