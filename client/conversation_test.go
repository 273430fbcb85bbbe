package client_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// TestQueueSteerCancelAndImagesThroughTheClient: the client's methods
// against a real server: a queued turn (position 1) cancelled before it
// starts (dequeued), a steer into the running turn, an image read from a
// file by its content and fetched back by its SHA-256, and the view
// following the queue and the steered message.
func TestQueueSteerCancelAndImagesThroughTheClient(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := client.New(h.URL)
	ctx := context.Background()
	running := h.Submit(sid, `/tool shell {"command": "while [ ! -f go ]; do sleep 0.05; done"}`)
	servertest.WaitFor(t, "the command to run", func() bool {
		return slices.Contains(servertest.Types(h.Live.Events(sid)), "tool.called")
	})
	if _, err := c.SubmitTurn(ctx, sid, client.TurnRequest{Content: "busy"}); !isCode(err, "turn_in_flight") {
		t.Fatalf("without queue: %v", err)
	}
	q, err := c.Queue(ctx, sid, "/echo later")
	if err != nil || !q.Queued || q.Position != 1 {
		t.Fatalf("queue: %+v %v", q, err)
	}
	if res, err := c.CancelTurn(ctx, sid, q.TurnID, ""); err != nil || res != protocol.CancelDequeued {
		t.Fatalf("cancel queued: %q %v", res, err)
	}
	var b bytes.Buffer
	servertest.Must(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, 7, 3))))
	path := filepath.Join(t.TempDir(), "screenshot.jpg") // the name lies; the content decides
	servertest.Must(t, os.WriteFile(path, b.Bytes(), 0o644))
	img, err := client.ImageFile(path)
	if err != nil || img.MediaType != "image/png" {
		t.Fatalf("ImageFile: %+v %v", img.MediaType, err)
	}
	if _, err := client.ImageFile(filepath.Join(h.Workspace, "README.md")); err == nil {
		t.Error("ImageFile took a text file")
	}
	s, err := c.Steer(ctx, sid, "/echo and this", running, img)
	if err != nil || !s.Steered || s.TurnID != running {
		t.Fatalf("steer: %+v %v", s, err)
	}
	servertest.Must(t, os.WriteFile(filepath.Join(h.Workspace, "go"), nil, 0o644))
	h.WaitTurn(sid)

	v := client.NewView(nil)
	for _, e := range h.Live.Events(sid) {
		v.Apply(envelope(e.ID, string(e.Type), e.SessionID, e.TurnID, string(e.Payload)))
	}
	if len(v.Queued) != 0 {
		t.Errorf("view's queue: %+v", v.Queued)
	}
	var steered *client.Message
	for _, m := range v.Messages {
		if m.ID == s.MessageID {
			steered = m
		}
	}
	if steered == nil || steered.TurnID != running || len(steered.Blocks) != 2 || steered.Blocks[1].Type != protocol.BlockImage {
		t.Fatalf("steered message in the view: %+v", steered)
	}
	data, mt, err := c.Image(ctx, sid, steered.Blocks[1].SHA256)
	if err != nil || mt != "image/png" || !bytes.Equal(data, b.Bytes()) {
		t.Errorf("Image: %s %d bytes %v", mt, len(data), err)
	}
	if _, _, err := c.Image(ctx, sid, "00"); !isCode(err, protocol.CodeImageNotFound) {
		t.Errorf("unknown image: %v", err)
	}
}

// TestViewFollowsTheQueue: turn.queued adds a turn to View.Queued (its
// preview and image count), turn.started and a queued turn's
// turn.cancelled take it out, and the snapshot's queued_turns set it.
func TestViewFollowsTheQueue(t *testing.T) {
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{SnapshotAtEventID: "evt_1", Session: []byte(`{"id":"s","current_turn_id":"turn_run",
		"queued_turns":[{"turn_id":"turn_a","message_id":"msg_a","preview":"a","source":"queue","queued_at":"2026-11-28T10:00:00Z"}]}`)})
	v.Apply(envelope("evt_2", "turn.queued", "s", "turn_b", `{"user_message":{"id":"msg_b","role":"user","content":[
		{"type":"text","text":"look   at\nthis"},{"type":"image","media_type":"image/png","sha256":"ab","size":3,"width":1,"height":1}],"status":"complete"},
		"position":2,"source":"queue"}`))
	if len(v.Queued) != 2 || v.Queued[1].Preview != "look at this" || v.Queued[1].Images != 1 || v.Queued[1].QueuedAt.IsZero() {
		t.Fatalf("queue: %+v", v.Queued)
	}
	v.Apply(envelope("evt_3", "turn.cancelled", "s", "turn_a", `{"reason":"user_cancel","phase":"queued","cancelled_tool_use_ids":[]}`))
	if len(v.Queued) != 1 || v.Turn.ID != "turn_run" || v.Turn.Status == "cancelled" {
		t.Fatalf("after the queued cancel: %+v %+v", v.Queued, v.Turn)
	}
	v.Apply(envelope("evt_4", "turn.started", "s", "turn_b", `{"user_message":{"id":"msg_b","role":"user","content":[{"type":"text","text":"look"}],"status":"complete"}}`))
	if len(v.Queued) != 0 || v.Turn.ID != "turn_b" {
		t.Fatalf("after the start: %+v %+v", v.Queued, v.Turn)
	}
}

func isCode(err error, code string) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Code == code
}
