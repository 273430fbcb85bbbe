package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// Follow-ups and images (docs/conversation.md) through the whole
// server: queue and steer while a turn runs, images on a turn.

// holdCmd is a turn that runs until the test writes the workspace file
// "go" (release): the builtin demo model calls the shell tool with it.
const holdCmd = `/tool shell {"command": "while [ ! -f go ]; do sleep 0.05; done; echo released"}`

// holding starts a server (with opts), creates a session, subscribes a
// client over tr to preset:chat, and starts a turn that holds (holdCmd):
// it returns once the turn's command runs.
func holding(t *testing.T, tr streamtest.Transport, opts ...servertest.Option) (*servertest.Harness, string, streamtest.Conn, string) {
	t.Helper()
	h := servertest.Start(t, "", opts...)
	sid := h.CreateSession()
	c := subscribed(t, tr, h, sid)
	running := h.Submit(sid, holdCmd)
	c.Events(wait, streamtest.UntilType(event.ToolCalled, running))
	return h, sid, c, running
}

func release(t *testing.T, h *servertest.Harness) {
	t.Helper()
	servertest.Must(t, os.WriteFile(filepath.Join(h.Workspace, "go"), nil, 0o644))
}

// apiError is an error answer's body.
type apiError struct {
	Error struct{ Code, Message string } `json:"error"`
}

// postTurn sends POST /sessions/{sid}/turns and returns the status, the
// accepted answer and the error answer (one of them is zero).
func postTurn(t *testing.T, h *servertest.Harness, sid string, body protocol.TurnRequest) (int, protocol.TurnAccepted, apiError) {
	t.Helper()
	var raw json.RawMessage
	st := h.Do("POST", "/sessions/"+sid+"/turns", body, &raw)
	var acc protocol.TurnAccepted
	var e apiError
	if st == http.StatusAccepted {
		servertest.Must(t, json.Unmarshal(raw, &acc))
	} else {
		servertest.Must(t, json.Unmarshal(raw, &e))
	}
	return st, acc, e
}

// subscribed connects a client of sid over tr, subscribed to preset:chat.
func subscribed(t *testing.T, tr streamtest.Transport, h *servertest.Harness, sid string) streamtest.Conn {
	t.Helper()
	c := tr.Connect(t, h.URL, sid, nil)
	c.Subscribe("preset:chat", nil, false)
	if f := c.Read(wait); f.Ack == nil {
		t.Fatalf("want subscribe_ack, got %s", f.Raw)
	}
	return c
}

func turnOf(e *protocol.EventEnvelope) string {
	if e.TurnID == nil {
		return ""
	}
	return *e.TurnID
}

// startedTurns lists the turns of evs' turn.started events, in order.
func startedTurns(evs []*protocol.EventEnvelope) []string {
	var out []string
	for _, e := range evs {
		if e.Type == string(event.TurnStarted) {
			out = append(out, turnOf(e))
		}
	}
	return out
}

// TestQueuedTurnsRunInOrderOverBothTransports: while a turn runs, a
// message without queue is refused with 409; with queue it is accepted
// (202, queued, its place), announced with turn.queued to every client
// and listed in the session's summary; the queued turns start once the
// running one ends, in the order they were queued, each with the
// message it was queued with.
func TestQueuedTurnsRunInOrderOverBothTransports(t *testing.T) {
	for _, tr := range streamtest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			h, sid, c, running := holding(t, tr)

			if st, _, e := postTurn(t, h, sid, protocol.TurnRequest{Content: "not queued"}); st != http.StatusConflict || e.Error.Code != "turn_in_flight" {
				t.Fatalf("without queue: %d %+v", st, e)
			}
			var queued []protocol.TurnAccepted
			for i, text := range []string{"/echo first follow-up", "/echo second follow-up"} {
				st, acc, e := postTurn(t, h, sid, protocol.TurnRequest{Content: text, Queue: true})
				if st != http.StatusAccepted || !acc.Queued || acc.Position != i+1 || acc.TurnID == "" || acc.MessageID == "" {
					t.Fatalf("queue %d: %d %+v %+v", i, st, acc, e)
				}
				queued = append(queued, acc)
			}
			// A client attaching now finds the queue in its snapshot.
			late := tr.Connect(t, h.URL, sid, nil)
			late.Subscribe("preset:chat", nil, true)
			late.Read(wait) // subscribe_ack
			var snapSum protocol.SessionSummary
			if f := late.Read(wait); f.Snap == nil || json.Unmarshal(f.Snap.Session, &snapSum) != nil || len(snapSum.QueuedTurns) != 2 ||
				snapSum.QueuedTurns[0].MessageID != queued[0].MessageID || snapSum.QueuedTurns[1].Source != protocol.QueueSourceQueue {
				t.Fatalf("snapshot's queue: %+v (%s)", snapSum.QueuedTurns, f.Raw)
			}
			late.Close()
			sum := summaryOf(t, h, sid)
			if len(sum.QueuedTurns) != 2 || sum.QueuedTurns[0].TurnID != queued[0].TurnID || sum.QueuedTurns[1].Preview != "/echo second follow-up" {
				t.Fatalf("summary's queue: %+v", sum.QueuedTurns)
			}

			release(t, h)
			evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, queued[1].TurnID))
			for i, e := range find(evs, event.TurnQueued) {
				p := streamtest.PayloadOf[protocol.TurnQueuedPayload](t, e)
				var m message.Message
				servertest.Must(t, json.Unmarshal(p.UserMessage, &m))
				if turnOf(e) != queued[i].TurnID || p.Position != i+1 || p.Source != protocol.QueueSourceQueue || m.ID != queued[i].MessageID {
					t.Errorf("turn.queued %d: turn %s %+v", i, turnOf(e), p)
				}
			}
			if got := startedTurns(evs); !slices.Equal(got, []string{queued[0].TurnID, queued[1].TurnID}) {
				t.Fatalf("started %v, want the queued turns in order", got)
			}
			// Each starts after the one before ended.
			ends := map[string]int{}
			for i, e := range evs {
				if e.Type == string(event.TurnCompleted) {
					ends[turnOf(e)] = i
				}
			}
			for i, e := range evs {
				if e.Type != string(event.TurnStarted) {
					continue
				}
				prev := running
				if turnOf(e) == queued[1].TurnID {
					prev = queued[0].TurnID
				}
				if end, ok := ends[prev]; !ok || end > i {
					t.Errorf("turn %s started before %s ended", turnOf(e), prev)
				}
				p := streamtest.PayloadOf[protocol.TurnStartedPayload](t, e)
				var m message.Message
				servertest.Must(t, json.Unmarshal(p.UserMessage, &m))
				want := queued[0].MessageID
				if turnOf(e) == queued[1].TurnID {
					want = queued[1].MessageID
				}
				if m.ID != want {
					t.Errorf("turn %s started with message %s, want %s", turnOf(e), m.ID, want)
				}
			}
			h.WaitTurn(sid)
			sum = summaryOf(t, h, sid)
			if len(sum.QueuedTurns) != 0 || sum.TurnCount != 3 {
				t.Errorf("after: queue %+v, %d turns", sum.QueuedTurns, sum.TurnCount)
			}
		})
	}
}

// TestQueuedTurnCancelledBeforeItStarts: a queued turn's cancel answers
// dequeued; it ends with turn.cancelled (phase queued) and never starts,
// and the turn after it runs.
func TestQueuedTurnCancelledBeforeItStarts(t *testing.T) {
	h, sid, c, _ := holding(t, streamtest.WebSocket)
	_, q1, _ := postTurn(t, h, sid, protocol.TurnRequest{Content: "/echo dropped", Queue: true})
	_, q2, _ := postTurn(t, h, sid, protocol.TurnRequest{Content: "/echo kept", Queue: true})
	var res struct{ TurnID, Status string }
	if st := h.Do("POST", "/sessions/"+sid+"/turns/"+q1.TurnID+"/cancel", map[string]string{}, &res); st != http.StatusAccepted || res.Status != "dequeued" {
		t.Fatalf("cancel: %d %+v", st, res)
	}
	// A second cancel finds it cancelled, as for any cancelled turn.
	if st := h.Do("POST", "/sessions/"+sid+"/turns/"+q1.TurnID+"/cancel", map[string]string{}, &res); st != http.StatusAccepted || res.Status != "already_cancelling" {
		t.Errorf("second cancel: %d %+v", st, res)
	}
	release(t, h)
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, q2.TurnID))
	var of1 []string
	for _, e := range evs {
		if turnOf(e) == q1.TurnID {
			of1 = append(of1, e.Type)
		}
	}
	if !slices.Equal(of1, []string{"turn.queued", "turn.cancelled"}) {
		t.Fatalf("events of the cancelled queued turn: %v", of1)
	}
	for _, e := range find(evs, event.TurnCancelled) {
		if p := payloadOf(t, e); turnOf(e) == q1.TurnID && (p["phase"] != protocol.TurnPhaseQueued || p["reason"] != "user_cancel") {
			t.Errorf("turn.cancelled %v", p)
		}
	}
	if got := startedTurns(evs); !slices.Equal(got, []string{q2.TurnID}) {
		t.Errorf("started %v", got)
	}
	row, err := h.Server.Store.Turn(context.Background(), q1.TurnID)
	if err != nil || row.Status != store.TurnCancelled {
		t.Errorf("row %+v %v", row, err)
	}
}

// TestQueueLongerThanTheSettingIsRefused: with max-queued-turns 1, a
// second queued turn is refused with queue_full and nothing of it is
// stored or announced.
func TestQueueLongerThanTheSettingIsRefused(t *testing.T) {
	h, sid, _, _ := holding(t, streamtest.WebSocket, func(c *config.Config) { c.MaxQueuedTurns = 1 })
	if st, _, _ := postTurn(t, h, sid, protocol.TurnRequest{Content: "one", Queue: true}); st != http.StatusAccepted {
		t.Fatalf("first: %d", st)
	}
	st, _, e := postTurn(t, h, sid, protocol.TurnRequest{Content: "two", Queue: true})
	if st != http.StatusConflict || e.Error.Code != protocol.CodeQueueFull || !strings.Contains(e.Error.Message, "max-queued-turns") {
		t.Fatalf("second: %d %+v", st, e)
	}
	qs, err := h.Server.Store.OpenQueuedTurns(context.Background())
	if err != nil || len(qs) != 1 {
		t.Errorf("stored queue %+v %v", qs, err)
	}
	release(t, h)
	h.WaitTurn(sid)
	if n := streamtest.CountEvents(h.Live.Events(sid), event.TurnQueued); n != 1 {
		t.Errorf("%d turn.queued events", n)
	}
}

// TestSteerEntersAtTheNextModelCall: a message sent with steer while a
// tool runs enters the running turn (202, steered, the running turn's
// id) at its next model call: turn.steered says after which message and
// before which call, the model sees it as a user message after the
// tool's result, and no other turn runs.
func TestSteerEntersAtTheNextModelCall(t *testing.T) {
	for _, tr := range streamtest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			h, sid, c, running := holding(t, tr)
			st, acc, e := postTurn(t, h, sid, protocol.TurnRequest{Content: "/echo bananas too", Steer: true, ExpectedTurnID: running})
			if st != http.StatusAccepted || !acc.Steered || acc.TurnID != running || acc.Queued {
				t.Fatalf("steer: %d %+v %+v", st, acc, e)
			}
			// expected_turn_id must name the running turn.
			if st, _, e := postTurn(t, h, sid, protocol.TurnRequest{Content: "x", Steer: true, ExpectedTurnID: "turn_other"}); st != http.StatusConflict || e.Error.Code != protocol.CodeTurnMismatch {
				t.Errorf("steer into another turn: %d %+v", st, e)
			}
			release(t, h)
			evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, running)) // after tool.called
			steered := find(evs, event.TurnSteered)
			if len(steered) != 1 {
				t.Fatalf("turn.steered: %d in %v", len(steered), types(evs))
			}
			p := streamtest.PayloadOf[protocol.TurnSteeredPayload](t, steered[0])
			var m message.Message
			servertest.Must(t, json.Unmarshal(p.UserMessage, &m))
			if m.ID != acc.MessageID || m.PlainText() != "/echo bananas too" || m.TurnID != running || p.CallIndex != 1 {
				t.Errorf("turn.steered %+v, message %+v", p, m)
			}
			// It comes after the tool's end and before the second call.
			at := slices.Index(evs, steered[0])
			calls := find(evs, event.LLMCallStarted)
			if len(calls) != 1 || slices.Index(evs, calls[0]) < at || slices.Index(evs, find(evs, event.ToolCompleted)[0]) > at {
				t.Errorf("order: %v", types(evs))
			}
			var page struct {
				Messages []message.Message `json:"messages"`
			}
			h.Do("GET", "/sessions/"+sid+"/messages", nil, &page)
			var roles []string
			for _, m := range page.Messages {
				roles = append(roles, string(m.Role))
			}
			if !slices.Equal(roles, []string{"user", "assistant", "tool", "user", "assistant"}) || page.Messages[3].ID != acc.MessageID ||
				page.Messages[2].ID != p.AfterMessageID {
				t.Errorf("conversation %v (after %s)", roles, p.AfterMessageID)
			}
			h.WaitTurn(sid)
			if n := streamtest.CountEvents(h.Live.Events(sid), event.TurnStarted); n != 1 {
				t.Errorf("%d turns started", n)
			}
		})
	}
}

// TestSteerIntoATurnThatEndsFirstBecomesTheNextQueuedTurn: a message
// steered into a turn that is then cancelled (no further model call
// takes it) becomes a queued turn of its own (turn.queued, source steer,
// the same message id), which runs next.
func TestSteerIntoATurnThatEndsFirstBecomesTheNextQueuedTurn(t *testing.T) {
	h, sid, c, running := holding(t, streamtest.WebSocket)
	_, acc, _ := postTurn(t, h, sid, protocol.TurnRequest{Content: "/echo after all", Steer: true})
	if !acc.Steered {
		t.Fatalf("steer: %+v", acc)
	}
	var res struct{ Status string }
	h.Do("POST", "/sessions/"+sid+"/turns/"+running+"/cancel", map[string]string{}, &res)
	evs := c.Events(wait, streamtest.UntilType(event.TurnStarted, ""))
	for len(startedTurns(evs)) < 1 || startedTurns(evs)[len(startedTurns(evs))-1] == running {
		evs = append(evs, c.Events(wait, streamtest.UntilType(event.TurnStarted, ""))...)
	}
	q := find(evs, event.TurnQueued)
	if len(q) != 1 {
		t.Fatalf("events %v", types(evs))
	}
	p := streamtest.PayloadOf[protocol.TurnQueuedPayload](t, q[0])
	var m message.Message
	servertest.Must(t, json.Unmarshal(p.UserMessage, &m))
	if p.Source != protocol.QueueSourceSteer || m.ID != acc.MessageID || turnOf(q[0]) == running {
		t.Errorf("turn.queued %+v message %s", p, m.ID)
	}
	if n := count(evs, event.TurnSteered); n != 0 {
		t.Errorf("%d turn.steered", n)
	}
	next := turnOf(q[0])
	rest := c.Events(wait, streamtest.UntilType(event.TurnCompleted, next))
	if f := find(append(evs, rest...), event.MessageComplete); len(f) == 0 {
		t.Fatal("no answer")
	}
	row, _ := h.Server.Store.Turn(context.Background(), running)
	if row.Status != store.TurnCancelled {
		t.Errorf("the running turn ended %s", row.Status)
	}
}

// TestSteerIntoACancellingTurnIsRefused: while a turn is being cancelled
// (its command ignores SIGTERM for a while), a steer is refused with
// 409 turn_cancelling, saying to queue instead; nothing is stored.
func TestSteerIntoACancellingTurnIsRefused(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := attach(t, h, sid)
	running := h.Submit(sid, `/tool shell {"command": "trap 'touch termed; while [ ! -f stop ]; do sleep 0.05; done; exit 1' TERM; touch armed; while true; do sleep 0.05; done"}`)
	c.Events(wait, streamtest.UntilType(event.ToolCalled, running))
	// The cancel must come after the trap is set, or the shell dies at once.
	waitFile(t, filepath.Join(h.Workspace, "armed"))
	var res struct{ Status string }
	if h.Do("POST", "/sessions/"+sid+"/turns/"+running+"/cancel", map[string]string{}, &res); res.Status != "cancelling" {
		t.Fatalf("cancel: %+v", res)
	}
	st, _, e := postTurn(t, h, sid, protocol.TurnRequest{Content: "too late", Steer: true})
	if st != http.StatusConflict || e.Error.Code != protocol.CodeTurnCancelling || !strings.Contains(e.Error.Message, "queue") {
		t.Fatalf("steer: %d %+v", st, e)
	}
	servertest.Must(t, os.WriteFile(filepath.Join(h.Workspace, "stop"), nil, 0o644))
	h.WaitTurn(sid)
	if n := streamtest.CountEvents(h.Live.Events(sid), event.TurnQueued) + streamtest.CountEvents(h.Live.Events(sid), event.TurnSteered); n != 0 {
		t.Errorf("%d follow-up events", n)
	}
}

// TestQueueSurvivesARestart: the server stops while a turn runs and two
// wait in its queue; the next server runs the two, in order.
func TestQueueSurvivesARestart(t *testing.T) {
	h, sid, _, running := holding(t, streamtest.WebSocket)
	_, q1, _ := postTurn(t, h, sid, protocol.TurnRequest{Content: "/echo one", Queue: true})
	_, q2, _ := postTurn(t, h, sid, protocol.TurnRequest{Content: "/echo two", Queue: true})
	h.Stop()
	ctx := context.Background()
	h2 := servertest.Start(t, h.Home)
	waitQueuedTurnsDone(t, h2, sid, q1.TurnID, q2.TurnID)
	if sum := summaryOf(t, h2, sid); len(sum.QueuedTurns) != 0 {
		t.Errorf("queue after: %+v", sum.QueuedTurns)
	}
	row, _ := h2.Server.Store.Turn(ctx, running)
	if row.Status != store.TurnCancelled {
		t.Errorf("the running turn: %+v", row)
	}
}

// TestQueueSurvivesACrash: the store as a crash leaves it (a turn still
// in flight, two turns queued behind it, their turn.queued committed):
// the next server closes the turn (server_restart) and runs the queue in
// order, each with its message.
func TestQueueSurvivesACrash(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	ctx := context.Background()
	now := time.Now().UTC()
	var ops []store.Op
	ops = append(ops, store.PutTurn{Turn: store.Turn{ID: "turn_crashed", SessionID: sid, Status: store.TurnInFlight, StartedAt: now}})
	for i, id := range []string{"turn_q1", "turn_q2"} {
		m := message.Message{ID: fmt.Sprintf("msg_q%d", i+1), SessionID: sid, TurnID: id, Role: message.RoleUser,
			Content: []message.Block{message.Text(fmt.Sprintf("/echo queued %d", i+1))}, Status: message.StatusComplete, CreatedAt: now}
		ops = append(ops, store.QueueTurn{Turn: store.QueuedTurn{TurnID: id, SessionID: sid, Message: m, Source: protocol.QueueSourceQueue, QueuedAt: now.Add(time.Duration(i) * time.Millisecond)}})
	}
	servertest.Must(t, h.Server.Store.Apply(ctx, ops...))
	h.Stop()
	h2 := servertest.Start(t, h.Home)
	waitQueuedTurnsDone(t, h2, sid, "turn_q1", "turn_q2")
	if row, _ := h2.Server.Store.Turn(ctx, "turn_crashed"); row.Status != store.TurnCancelled || row.Reason != "server_restart" {
		t.Errorf("the crashed turn: %+v", row)
	}
	msgs, err := h2.Server.Sessions.Conversation(ctx, sid)
	servertest.Must(t, err)
	var users []string
	for _, m := range msgs {
		if m.Role == message.RoleUser {
			users = append(users, m.ID)
		}
	}
	if !slices.Equal(users, []string{"msg_q1", "msg_q2"}) {
		t.Errorf("user messages %v", users)
	}
}

// waitQueuedTurnsDone waits for turns (queued, in this order) to
// complete, and checks they started in that order.
func waitQueuedTurnsDone(t *testing.T, h *servertest.Harness, sid string, turns ...string) {
	t.Helper()
	ctx := context.Background()
	servertest.WaitFor(t, "the queued turns to complete", func() bool {
		for _, id := range turns {
			if row, err := h.Server.Store.Turn(ctx, id); err != nil || row.Status != store.TurnCompleted {
				return false
			}
		}
		return true
	})
	evs, err := h.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.TurnStarted}})
	servertest.Must(t, err)
	var started []string
	for _, e := range evs {
		if slices.Contains(turns, e.TurnID) {
			started = append(started, e.TurnID)
		}
	}
	if !slices.Equal(started, turns) {
		t.Fatalf("started %v, want %v", started, turns)
	}
}

func pngOf(t testing.TB, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, 0, color.RGBA{200, uint8(x), 10, 255})
	}
	var b bytes.Buffer
	servertest.Must(t, png.Encode(&b, img))
	return b.Bytes()
}

func jpegOf(t testing.TB, w, h int) []byte {
	var b bytes.Buffer
	servertest.Must(t, jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)), nil))
	return b.Bytes()
}

// TestImagesOnATurnOverBothTransports: a turn with a PNG and a JPEG: the
// user message holds an image block per image (type, size, SHA-256, no
// bytes), the model receives the bytes (the demo model says what it
// got), and GET /sessions/{id}/images/{sha256} serves the bytes with
// their type and nosniff, to that session only.
func TestImagesOnATurnOverBothTransports(t *testing.T) {
	for _, tr := range streamtest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			h := servertest.Start(t, "")
			sid, other := h.CreateSession(), h.CreateSession()
			c := subscribed(t, tr, h, sid)
			pngData, jpegData := pngOf(t, 3, 2), jpegOf(t, 4, 4)
			st, acc, e := postTurn(t, h, sid, protocol.TurnRequest{Content: "what is in these?", Images: []protocol.ImageInput{
				{MediaType: "image/png", Data: pngData}, {MediaType: "image/jpeg", Data: jpegData}}})
			if st != http.StatusAccepted {
				t.Fatalf("%d %+v", st, e)
			}
			evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, acc.TurnID))
			p := streamtest.PayloadOf[protocol.TurnStartedPayload](t, find(evs, event.TurnStarted)[0])
			if bytes.Contains(p.UserMessage, []byte(`"data"`)) {
				t.Errorf("the event carries image bytes: %s", p.UserMessage)
			}
			var m message.Message
			servertest.Must(t, json.Unmarshal(p.UserMessage, &m))
			imgs := m.Images()
			if len(imgs) != 2 || imgs[0].Type != protocol.BlockImage || imgs[0].MediaType != "image/png" || imgs[0].Width != 3 ||
				imgs[1].MediaType != "image/jpeg" || imgs[1].Size != int64(len(jpegData)) {
				t.Fatalf("user message %s", p.UserMessage)
			}
			done := payloadOf(t, find(evs, event.MessageComplete)[0])
			if fc, _ := json.Marshal(done["final_content"]); !strings.Contains(string(fc), "I see 2 images (PNG 3×2, JPEG 4×4)") {
				t.Errorf("the model got %s", fc)
			}
			resp, body := getImage(t, h, sid, imgs[0].SHA256)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
				!bytes.Equal(body, pngData) {
				t.Errorf("GET image: %d %v (%d bytes)", resp.StatusCode, resp.Header, len(body))
			}
			if resp, _ := getImage(t, h, other, imgs[0].SHA256); resp.StatusCode != http.StatusNotFound {
				t.Errorf("another session's image: %d", resp.StatusCode)
			}
		})
	}
}

func getImage(t *testing.T, h *servertest.Harness, sid, sha string) (*http.Response, []byte) {
	t.Helper()
	resp, err := h.HTTP.Get(h.URL + "/sessions/" + sid + "/images/" + sha)
	servertest.Must(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	servertest.Must(t, err)
	return resp, b.Bytes()
}

// TestBadImagesAreRefusedAndNothingStored: 11 images, one of 6 MB, a
// PNG sent as a JPEG, text sent as a PNG, a truncated PNG and a
// decompression bomb are each refused with 400 invalid_image naming the
// image and what is wrong; no turn, event or image is stored.
func TestBadImagesAreRefusedAndNothingStored(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	good := pngOf(t, 8, 8)
	eleven := make([]protocol.ImageInput, 11)
	for i := range eleven {
		eleven[i] = protocol.ImageInput{MediaType: "image/png", Data: good}
	}
	big := append(append([]byte{}, good...), make([]byte, 6<<20)...)
	bomb := pngOf(t, 2, 2)
	bomb[16], bomb[20] = 0x7f, 0x7f // 2 Gpixels a side, CRC left wrong
	for name, c := range map[string]struct {
		imgs []protocol.ImageInput
		want string
	}{
		"eleven images":        {eleven, "at most 10"},
		"6 MB":                 {[]protocol.ImageInput{{MediaType: "image/png", Data: big}}, "the limit is 5242880"},
		"a PNG sent as a JPEG": {[]protocol.ImageInput{{MediaType: "image/jpeg", Data: good}}, "media_type says image/jpeg but the data is PNG"},
		"text sent as a PNG":   {[]protocol.ImageInput{{MediaType: "image/png", Data: []byte("hello, I am a PNG")}}, "not a PNG, JPEG, GIF or WebP"},
		"a truncated PNG":      {[]protocol.ImageInput{{MediaType: "image/png", Data: good}, {MediaType: "image/png", Data: good[:len(good)-30]}}, "image 2"},
		"a decompression bomb": {[]protocol.ImageInput{{MediaType: "image/png", Data: bomb}}, "PNG"},
	} {
		st, _, e := postTurn(t, h, sid, protocol.TurnRequest{Content: "look", Images: c.imgs})
		if st != http.StatusBadRequest || e.Error.Code != protocol.CodeInvalidImage || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s: %d %+v", name, st, e)
		}
	}
	ctx := context.Background()
	evs, err := h.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}})
	servertest.Must(t, err)
	if got := servertest.Types(evs); !slices.Equal(got, []event.Type{event.SessionCreated}) {
		t.Errorf("events %v", got)
	}
	if _, err := h.Server.Store.ImageData(ctx, shaOf(good)); err == nil {
		t.Error("an image of a refused message was stored")
	}
}

// TestImagesReachAnthropicAndOpenAIInTheirFormats: the image of a turn
// reaches Anthropic as a base64 image block and an OpenAI vision model
// as an image_url data URL, after the text; a model without vision
// (an unknown OpenAI-compatible one) reads a text in its place.
func TestImagesReachAnthropicAndOpenAIInTheirFormats(t *testing.T) {
	data := pngOf(t, 5, 5)
	b64 := base64Of(data)
	img := []protocol.ImageInput{{MediaType: "image/png", Data: data}}

	t.Run("anthropic", func(t *testing.T) {
		fake := &fakeAnthropic{}
		api := newTestServer(t, fake)
		h := servertest.Start(t, "", withAnthropic(api))
		sid := createWithModel(t, h, sonnet)
		postTurn(t, h, sid, protocol.TurnRequest{Content: "see this", Images: img})
		h.WaitTurn(sid)
		fake.mu.Lock()
		defer fake.mu.Unlock()
		content, _ := json.Marshal(fake.bodies[0]["messages"].([]any)[0].(map[string]any)["content"])
		want := `"source":{"data":"` + b64 + `","media_type":"image/png","type":"base64"},"type":"image"}`
		if !strings.Contains(canonical(t, content), want) || !strings.Contains(string(content), "see this") {
			t.Errorf("content %s", content)
		}
	})
	for _, c := range []struct{ model, want string }{
		{"openai:gpt-4o", `{"image_url":{"url":"data:image/png;base64,` + b64 + `"},"type":"image_url"}`},
		{"openai:llama3", "[an image was left out (PNG 5×5"},
	} {
		t.Run(c.model, func(t *testing.T) {
			fake := &recordingOpenAI{}
			api := newTestServer(t, fake)
			h := servertest.Start(t, "", func(cf *config.Config) {
				cf.Providers = config.Providers{"openai": {BaseURL: api + "/v1", APIKey: "k"}}
			})
			sid := createWithModel(t, h, c.model)
			postTurn(t, h, sid, protocol.TurnRequest{Content: "see this", Images: img})
			h.WaitTurn(sid)
			fake.mu.Lock()
			defer fake.mu.Unlock()
			if len(fake.bodies) == 0 {
				t.Fatal("no request")
			}
			msgs, _ := json.Marshal(fake.bodies[0]["messages"])
			if !strings.Contains(canonical(t, msgs), c.want) {
				t.Errorf("messages %s", msgs)
			}
			if c.model == "openai:llama3" && strings.Contains(string(msgs), b64) {
				t.Error("a model without vision was sent the bytes")
			}
		})
	}
}

// TestReadFileOfAnImageReachesTheModel: read_file of a PNG returns it as
// an image: the model receives its bytes (the demo model says so), the
// tool result's stored message refers to it, and the session serves it.
func TestReadFileOfAnImageReachesTheModel(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	data := pngOf(t, 6, 4)
	servertest.Must(t, os.WriteFile(filepath.Join(h.Workspace, "shot.png"), data, 0o644))
	c := attach(t, h, sid)
	turn := h.Submit(sid, `/tool read_file {"path": "shot.png"}`)
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	if p := payloadOf(t, find(evs, event.ToolCompleted)[0]); !strings.Contains(fmt.Sprint(p["result"]), "PNG 6×4") {
		t.Errorf("tool.completed %v", p)
	}
	final := find(evs, event.MessageComplete)
	if fc, _ := json.Marshal(payloadOf(t, final[len(final)-1])["final_content"]); !strings.Contains(string(fc), "The tool returned 1 image (PNG 6×4)") {
		t.Errorf("the model got %s", fc)
	}
	resp, body := getImage(t, h, sid, shaOf(data))
	if resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Errorf("GET image: %d", resp.StatusCode)
	}
}

// recordingOpenAI is an OpenAI-compatible server that records the
// bodies of chat completions and answers each with a line of text.
type recordingOpenAI struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (f *recordingOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, `data: {"id":"a","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"An image."},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
}

func newTestServer(t *testing.T, h http.Handler) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

// canonical re-encodes JSON with its object keys sorted.
func canonical(t *testing.T, raw []byte) string {
	var v any
	servertest.Must(t, json.Unmarshal(raw, &v))
	b, err := json.Marshal(v)
	servertest.Must(t, err)
	return string(b)
}

func base64Of(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func shaOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func summaryOf(t *testing.T, h *servertest.Harness, sid string) protocol.SessionSummary {
	t.Helper()
	var info protocol.AttachInfo
	if st := h.Do("GET", "/sessions/"+sid, nil, &info); st != http.StatusOK {
		t.Fatalf("GET session: %d", st)
	}
	return info.Session
}

// TestQueueOrderProperty: whatever turns are queued behind a running
// one and whichever of them are cancelled before they start, the others
// start in the order they were queued, each after the one before ended,
// and a cancelled one never starts (its only events turn.queued and
// turn.cancelled, phase queued).
func TestQueueOrderProperty(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		// Each check runs real turns: a handful by default.
		servertest.Must(t, flag.Set("rapid.checks", "6"))
		t.Cleanup(func() { _ = flag.Set("rapid.checks", f.DefValue) })
	}
	h := servertest.Start(t, "")
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		sid := h.CreateSession()
		gate := fmt.Sprintf("gate-%d", n)
		running := h.Submit(sid, fmt.Sprintf(`/tool shell {"command": "while [ ! -f %s ]; do sleep 0.05; done"}`, gate))
		servertest.WaitFor(t, "the command to run", func() bool {
			return slices.Contains(servertest.Types(h.Live.Events(sid)), event.ToolCalled)
		})
		var kept, dropped []string
		for i := range rapid.IntRange(1, 5).Draw(rt, "queued") {
			st, acc, e := postTurn(t, h, sid, protocol.TurnRequest{Content: fmt.Sprintf("/echo %d", i), Queue: true})
			if st != http.StatusAccepted {
				rt.Fatalf("queue %d: %d %+v", i, st, e)
			}
			kept = append(kept, acc.TurnID)
		}
		for _, id := range slices.Clone(kept) {
			if rapid.Bool().Draw(rt, "cancel "+id) {
				var res struct{ Status string }
				h.Do("POST", "/sessions/"+sid+"/turns/"+id+"/cancel", map[string]string{}, &res)
				if res.Status != string(protocol.CancelDequeued) {
					rt.Fatalf("cancel %s: %+v", id, res)
				}
				kept = slices.DeleteFunc(kept, func(k string) bool { return k == id })
				dropped = append(dropped, id)
			}
		}
		servertest.Must(t, os.WriteFile(filepath.Join(h.Workspace, gate), nil, 0o644))
		servertest.WaitFor(t, "the queue to run", func() bool {
			for _, id := range append([]string{running}, kept...) {
				if row, err := h.Server.Store.Turn(ctx, id); err != nil || row.Status == store.TurnInFlight {
					return false
				}
			}
			s := summaryOf(t, h, sid)
			return s.CurrentTurnID == nil && len(s.QueuedTurns) == 0
		})
		evs, err := h.Server.Store.Events(ctx, store.EventQuery{SessionIDs: []string{sid}})
		servertest.Must(t, err)
		var started []string
		ended := map[string]int{}
		for i, e := range evs {
			switch e.Type {
			case event.TurnStarted:
				started = append(started, e.TurnID)
				if len(started) > 1 {
					if end, ok := ended[started[len(started)-2]]; !ok || end > i {
						rt.Fatalf("turn %s started before the one before it ended", e.TurnID)
					}
				}
			case event.TurnCompleted, event.TurnCancelled:
				ended[e.TurnID] = i
			}
		}
		if want := append([]string{running}, kept...); !slices.Equal(started, want) {
			rt.Fatalf("started %v, want %v", started, want)
		}
		for _, id := range dropped {
			var types []event.Type
			for _, e := range evs {
				if e.TurnID == id {
					types = append(types, e.Type)
				}
			}
			if !slices.Equal(types, []event.Type{event.TurnQueued, event.TurnCancelled}) {
				rt.Fatalf("events of the cancelled %s: %v", id, types)
			}
		}
	})
}
