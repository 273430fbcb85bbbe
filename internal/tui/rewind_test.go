package tui

import (
	"encoding/json"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// rewindSession shows a session of three turns; the second had a
// message steered into it and the third prompt carried an image.
func rewindSession(h *harness) {
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: []byte(`{"id":"` + testSession + `","active_model":"builtin:demo"}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"m1","role":"user","turn_id":"t1","status":"complete","content":[{"type":"text","text":"first question"}]}`),
			json.RawMessage(`{"id":"m2","role":"assistant","turn_id":"t1","status":"complete","content":[{"type":"text","text":"first answer"}]}`),
			json.RawMessage(`{"id":"m3","role":"user","turn_id":"t2","status":"complete","content":[{"type":"text","text":"refactor the parser\nand keep the tests green"}]}`),
			json.RawMessage(`{"id":"m4","role":"assistant","turn_id":"t2","status":"complete","content":[{"type":"text","text":"working"}]}`),
			json.RawMessage(`{"id":"m5","role":"user","turn_id":"t2","status":"complete","content":[{"type":"text","text":"steered: use tabs"}]}`),
			json.RawMessage(`{"id":"m6","role":"assistant","turn_id":"t2","status":"complete","content":[{"type":"text","text":"done"}]}`),
			json.RawMessage(`{"id":"m7","role":"user","turn_id":"t3","status":"complete","content":[{"type":"text","text":"what does this show?"},{"type":"image","image":{"sha256":"ab","media_type":"image/png"}}]}`),
			json.RawMessage(`{"id":"m8","role":"assistant","turn_id":"t3","status":"complete","content":[{"type":"text","text":"a cat"}]}`),
		},
		SnapshotAtEventID: "evt_00000000000000000000000009",
	})
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
}

// /rewind lists the prompts that began a turn, newest first (not the
// first, which has nothing before it, nor a message steered into a
// turn); f on one forks the session at the message before it with the
// files, and the copy opens with the prompt in its composer and a
// notice of what was put back.
func TestRewindForksBeforeThePromptAndPutsItInTheComposer(t *testing.T) {
	h := newHarness(t)
	rewindSession(h)
	h.typeText("/rewind")
	h.key(enter)
	h.contains("rewind to before a prompt", " 1  › what does this show? [1 image(s)]", " 2  › refactor the parser and keep the tests green")
	h.lacks("first question", "steered: use tabs")
	h.key(tea.KeyPressMsg{Code: tea.KeyDown})
	msg := h.run(h.key(tea.KeyPressMsg{Code: 'f', Text: "f"}))
	if _, ok := msg.(rewoundMsg); !ok {
		t.Fatalf("f answered %#v", msg)
	}
	if len(h.api.forks) != 1 || h.api.forks[0] != (client.ForkRequest{MessageID: "m2", Checkpoint: true}) {
		t.Fatalf("forks %+v, want one at m2 with the checkpoint", h.api.forks)
	}
	if h.m.next != "sess_FORK" || h.m.nextDraft != "refactor the parser\nand keep the tests green" {
		t.Fatalf("next %q, draft %q", h.m.next, h.m.nextDraft)
	}
	if !strings.Contains(h.m.nextFlash, "rewound with the files: 2 restored, 1 removed") {
		t.Fatalf("notice %q", h.m.nextFlash)
	}

	// The next screen starts with them.
	m := newModel(t.Context(), h.api, newFeed(), options{sessionID: "sess_FORK", workspace: "/ws", draft: h.m.nextDraft, flash: h.m.nextFlash})
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 40})
	if m.composer.Value() != h.m.nextDraft || !strings.Contains(m.statusView(), "rewound with the files") {
		t.Fatalf("the fork's screen starts with draft %q and status %q", m.composer.Value(), m.statusView())
	}
}

// enter rewinds the conversation only; the prompt's images are named in
// the notice, as the composer holds text.
func TestRewindWithoutTheFiles(t *testing.T) {
	h := newHarness(t)
	rewindSession(h)
	h.typeText("/rewind")
	h.key(enter)
	h.run(h.key(enter))
	if len(h.api.forks) != 1 || h.api.forks[0] != (client.ForkRequest{MessageID: "m6"}) {
		t.Fatalf("forks %+v, want one at m6 without the checkpoint", h.api.forks)
	}
	if h.m.nextDraft != "what does this show?" || !strings.Contains(h.m.nextFlash, "the session you left is unchanged") ||
		!strings.Contains(h.m.nextFlash, "1 image(s) are not in the composer") {
		t.Fatalf("draft %q, notice %q", h.m.nextDraft, h.m.nextFlash)
	}
}

// With one prompt there is nothing to go back to; esc closes the list
// without a fork.
func TestRewindWithNothingBeforeOrClosed(t *testing.T) {
	h := newHarness(t)
	h.typeText("/rewind")
	h.key(enter)
	h.contains("nothing to rewind to")
	if h.m.overlay != overlayNone {
		t.Fatal("a list opened with nothing in it")
	}
	rewindSession(h)
	h.typeText("/rewind")
	h.key(enter)
	h.key(esc)
	if h.m.overlay != overlayNone || len(h.api.forks) != 0 || h.m.next != "" {
		t.Fatalf("esc: overlay %v, forks %v, next %q", h.m.overlay, h.api.forks, h.m.next)
	}
}
