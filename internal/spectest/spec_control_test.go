package spectest_test

// Spec §11.1 items 10, 13 and 14 over each transport, and the
// WebSocket's own edges: refused client frames, the read limit, the
// subscribe timeout, attach tokens and the local-safety guard on the
// upgrade.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/stream"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestSpec11_1_10_IdempotentCancel: two cancels for a turn that is
// streaming (cancel frames on the WebSocket; on SSE, whose clients send
// nothing on the stream, two POST …/cancel) give one cancellation
// (§6.2.1: message.complete cancelled with the partial text,
// llm.call_failed cancelled, turn.cancelled with the cancel's reason, no
// tool.failed), seen identically by both clients (§10.4), and one
// bus.handler_warning for the redundant cancel (§6.5). Cancelling an
// unknown turn is refused (an error frame, the connection stays open;
// 404 turn_not_found over HTTP); cancelling an ended turn changes
// nothing.
func TestSpec11_1_10_IdempotentCancel(t *testing.T) {
	streamtest.EachTransport(t, testIdempotentCancel)
}

func testIdempotentCancel(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "", demoDelay(5*time.Millisecond))
	sid := h.CreateSession()
	a, _, _ := attachSub(t, tr, h, sid, "preset:full", nil, false)
	b, _, _ := attachSub(t, tr, h, sid, "preset:full", nil, false)
	turn := h.Submit(sid, "/long 400")

	var seen []*protocol.EventEnvelope
	for streamtest.CountType(seen, event.TextDelta) < 5 {
		seen = append(seen, a.Events(readTimeout, func(*protocol.EventEnvelope) bool { return true })...)
	}
	const reason = "user_pressed_ctrl_c"
	for _, want := range []string{"cancelling", "already_cancelling"} {
		cancelTurn(t, h, a, sid, turn, reason, want)
	}
	evA := append(seen, until(t, a, event.TurnCancelled, turn)...)
	evB := until(t, b, event.TurnCancelled, turn)
	h.WaitTurn(sid)

	// Both clients: the same events, up to the cancellation.
	tail := func(evs []*protocol.EventEnvelope) []string {
		var out []string
		for _, e := range evs {
			if e.TurnID != nil && *e.TurnID == turn {
				out = append(out, e.ID)
			}
		}
		return out
	}
	if !slices.Equal(tail(evA), tail(evB)) {
		t.Fatalf("the clients saw different turn events: %d and %d", len(tail(evA)), len(tail(evB)))
	}

	stored := storedEvents(t, h, sid)
	var cancelled, failed, completed, toolFailed int
	for _, e := range stored {
		if e.TurnID != turn {
			continue
		}
		switch e.Type {
		case event.TurnCancelled:
			cancelled++
			var p struct {
				Reason string `json:"reason"`
			}
			servertest.Must(t, json.Unmarshal(e.Payload, &p))
			if p.Reason != reason {
				t.Errorf("turn.cancelled reason %q, want %q", p.Reason, reason)
			}
		case event.LLMCallFailed:
			failed++
			if p := streamtest.EventPayloadOf[streamtest.LLMPayload](t, e); p.ErrorClass != "cancelled" {
				t.Errorf("llm.call_failed error_class %q", p.ErrorClass)
			}
		case event.TurnCompleted:
			completed++
		case event.ToolFailed:
			toolFailed++
		}
	}
	if cancelled != 1 || failed != 1 || completed != 0 || toolFailed != 0 {
		t.Fatalf("stored: %d turn.cancelled, %d llm.call_failed, %d turn.completed, %d tool.failed", cancelled, failed, completed, toolFailed)
	}

	// The client's view of the cancellation, in order.
	var partial strings.Builder
	var mc []streamtest.CompletePayload
	order := []string{}
	for _, e := range evA {
		switch event.Type(e.Type) {
		case event.TextDelta:
			partial.WriteString(streamtest.PayloadOf[streamtest.DeltaPayload](t, e).Text)
		case event.MessageComplete:
			mc = append(mc, streamtest.PayloadOf[streamtest.CompletePayload](t, e))
			order = append(order, e.Type)
		case event.LLMCallFailed, event.TurnCancelled:
			order = append(order, e.Type)
		}
	}
	if !slices.Equal(order, []string{"message.complete", "llm.call_failed", "turn.cancelled"}) {
		t.Fatalf("cancellation sequence %v", order)
	}
	if mc[0].StopReason != "cancelled" || len(mc[0].FinalContent) != 1 || mc[0].FinalContent[0].Text != partial.String() {
		t.Fatalf("message.complete %+v; deltas gave %d bytes", mc[0], partial.Len())
	}
	if partial.Len() == 0 || strings.Contains(partial.String(), "Sentence 400 of 400.") {
		t.Fatalf("partial text of %d bytes", partial.Len())
	}
	final := messages(t, h, sid)
	if last := final[len(final)-1]; last.Status != message.StatusCancelled || last.PlainText() != partial.String() {
		t.Fatalf("persisted partial message: %s %q", last.Status, last.PlainText())
	}

	// One warning for the redundant cancel; A (preset:full) sees it.
	redundant := func() int {
		n := 0
		for _, e := range storedEvents(t, h, sid, event.BusHandlerWarning) {
			if p := streamtest.EventPayloadOf[streamtest.WarningPayload](t, e); p.Reason == "redundant_cancel" && p.TurnID == turn {
				n++
			}
		}
		return n
	}
	servertest.WaitFor(t, "the redundant-cancel warning", func() bool { return redundant() > 0 })
	isRedundant := func(e *protocol.EventEnvelope) bool {
		return e.Type == string(event.BusHandlerWarning) && streamtest.PayloadOf[streamtest.WarningPayload](t, e).Reason == "redundant_cancel"
	}
	if !slices.ContainsFunc(evA, isRedundant) {
		a.Events(readTimeout, isRedundant)
	}

	// An unknown turn: refused, and the connection goes on.
	if ws, ok := a.(*streamtest.Client); ok {
		ws.Send(cancelFrame("turn_unknown", reason))
		for {
			f := readSkippingPings(t, a)
			if f.Type == protocol.TypeEvent {
				continue // meta-events of the session
			}
			if f.Type != protocol.TypeError || f.Code != protocol.CodeCancelFailed {
				t.Fatalf("want error cancel_failed, got %s", f.Raw)
			}
			break
		}
	} else {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if st := h.Do("POST", "/sessions/"+sid+"/turns/turn_unknown/cancel", map[string]string{"reason": reason}, &e); st != http.StatusNotFound || e.Error.Code != api.CodeTurnNotFound {
			t.Fatalf("cancel of an unknown turn: %d %+v", st, e)
		}
	}
	// A turn that completed: nothing happens.
	done := h.Submit(sid, "/echo done")
	h.WaitTurn(sid)
	cancelTurn(t, h, b, sid, done, "", "already_ended")
	for {
		f := readSkippingPings(t, b)
		if f.Event != nil && f.Event.Type == string(event.TurnCompleted) && *f.Event.TurnID == done {
			break
		}
		if f.Event == nil {
			t.Fatalf("unexpected %s", f.Raw)
		}
	}
	alive(t, b, "after-late-cancel")
	if redundant() != 1 {
		t.Fatalf("%d redundant-cancel warnings", redundant())
	}
	if n := len(storedEvents(t, h, sid, event.TurnCancelled)); n != 1 {
		t.Fatalf("%d turn.cancelled", n)
	}
}

// cancelTurn cancels a turn the way a client of the transport does: a
// cancel frame on the WebSocket (whose answer, if any, is events), POST
// …/cancel beside an SSE stream (answered with status).
func cancelTurn(t *testing.T, h *servertest.Harness, c streamtest.Conn, sid, turn, reason, status string) {
	t.Helper()
	if ws, ok := c.(*streamtest.Client); ok {
		ws.Send(cancelFrame(turn, reason))
		return
	}
	var r struct {
		Status string `json:"status"`
	}
	if st := h.Do("POST", "/sessions/"+sid+"/turns/"+turn+"/cancel", map[string]string{"reason": reason}, &r); st != http.StatusAccepted || r.Status != status {
		t.Fatalf("cancel: %d %q, want 202 %q", st, r.Status, status)
	}
}

// TestSpec11_1_13_FilterValidation: an unknown event type, an unknown
// preset, an empty type list or a bad actor is refused with
// invalid_filter naming the offending entry, and the same connection can
// subscribe again; streaming-only and catalog types mix in one filter;
// an actors filter delivers only that actor's events. On SSE the filter
// is the query (types=, actors=, preset=), refused with 400.
func TestSpec11_1_13_FilterValidation(t *testing.T) {
	streamtest.EachTransport(t, testFilterValidation)
}

func testFilterValidation(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()

	c := connect(t, tr, h, sid)
	for _, tc := range []struct {
		filter    any
		offending string
	}{
		{protocol.Filter{EventTypes: []string{"text.delta", "made.up.thing"}}, "made.up.thing"},
		{protocol.Filter{EventTypes: []string{"turn.started", "Turn.Started"}}, "Turn.Started"},
		{protocol.Filter{EventTypes: []string{"message"}}, "message"},
		{"preset:nope", "preset:nope"},
		{"preset:CHAT", "preset:CHAT"},
		{protocol.Filter{EventTypes: []string{}}, ""},
		{protocol.Filter{Actors: []string{""}}, ""},
	} {
		serr := subscribeErr(t, c, tc.filter, nil, false)
		if serr.Code != protocol.CodeInvalidFilter || serr.Offending != tc.offending || serr.Message == "" {
			t.Fatalf("filter %+v: %+v", tc.filter, serr)
		}
	}
	mixed := protocol.Filter{EventTypes: []string{"text.delta", "route.decided", "turn.completed", "text.delta"}}
	ack, _ := subscribeOn(t, c, mixed, nil, false)
	if want := []string{"text.delta", "route.decided", "turn.completed"}; !slices.Equal(ack.ResolvedFilter.EventTypes, want) {
		t.Fatalf("resolved filter %v, want %v", ack.ResolvedFilter.EventTypes, want)
	}

	tools := protocol.Filter{Actors: []string{event.ActorTool}}
	ct, ackTools, _ := attachSub(t, tr, h, sid, tools, nil, false)
	if len(ackTools.ResolvedFilter.EventTypes) != len(event.All()) || !slices.Equal(ackTools.ResolvedFilter.Actors, tools.Actors) {
		t.Fatalf("resolved actors filter %+v", ackTools.ResolvedFilter)
	}
	presets := map[string]any{"preset:chat": "preset:chat", "preset:full": "preset:full"}
	for name, p := range presets {
		cp, ackP, _ := attachSub(t, tr, h, sid, p, nil, false)
		want := streamtest.PresetTypes(name)
		if len(ackP.ResolvedFilter.EventTypes) != len(want) {
			t.Fatalf("%s resolved to %d types, want %d", name, len(ackP.ResolvedFilter.EventTypes), len(want))
		}
		for _, ty := range ackP.ResolvedFilter.EventTypes {
			if !want[ty] {
				t.Fatalf("%s resolved to %s", name, ty)
			}
		}
		cp.Close()
	}

	t1 := h.Submit(sid, "what is in my workspace?")
	mixedEvs := until(t, c, event.TurnCompleted, t1)
	h.WaitTurn(sid)
	t2 := h.Submit(sid, `/tool list_dir {"path": "src"}`)
	h.WaitTurn(sid)
	toolEvs := ct.Events(readTimeout, func(e *protocol.EventEnvelope) bool {
		return e.Type == string(event.ToolCompleted) && e.TurnID != nil && *e.TurnID == t2
	})

	set := map[string]bool{"text.delta": true, "route.decided": true, "turn.completed": true}
	streamtest.SameIDs(t, "mixed filter", mixedEvs, delivered(h, sid, "", mixedEvs[len(mixedEvs)-1].ID, set))
	if streamtest.CountType(mixedEvs, event.TextDelta) == 0 || streamtest.CountType(mixedEvs, event.RouteDecided) != 1 {
		t.Fatalf("mixed filter delivered %v", streamtest.Collapse(streamtest.Types(mixedEvs)))
	}
	var wantTools []string
	for _, e := range h.Live.Events(sid) {
		if e.Actor == event.ActorTool && e.ID <= toolEvs[len(toolEvs)-1].ID {
			wantTools = append(wantTools, e.ID)
		}
	}
	if !slices.Equal(streamtest.IDs(toolEvs), wantTools) || len(toolEvs) != 4 {
		t.Fatalf("actors [tool] delivered %v", streamtest.Types(toolEvs))
	}
	for _, e := range toolEvs {
		if e.Actor != event.ActorTool || !strings.HasPrefix(e.Type, "tool.") {
			t.Fatalf("actors [tool] delivered %s from %s", e.Type, e.Actor)
		}
	}
}

// TestSpec11_1_14_UnknownEventTypeSkipped: the test client (the
// reference behaviour of spec §9.2) skips an event frame of a type it
// does not know, without an error, and goes on with the next frame, on
// either transport. The real server never sends an unknown type (every
// filter is a list of known types), so a stub server plays a newer
// server here.
func TestSpec11_1_14_UnknownEventTypeSkipped(t *testing.T) {
	frames := []string{
		`{"type":"subscribe_ack","resolved_filter":{"event_types":["turn.started"],"actors":null,"include_worker_sessions":false},"since":null,"snapshot":false,"replay_event_count":0,"streaming_gap":false}`,
		`{"type":"event","event":{"id":"evt_01J0000000000000000000000A","type":"future.thing","session_id":"sess_1","turn_id":null,"ts":"2026-05-08T14:23:11.000Z","actor":"future","payload":{"shape":["unknown"]}}}`,
		`{"type":"event","event":{"id":"evt_01J0000000000000000000000B","type":"made.up.thing","session_id":"sess_1","turn_id":null,"ts":"2026-05-08T14:23:11.001Z","actor":"future","payload":{}}}`,
		`{"type":"event","event":{"id":"evt_01J0000000000000000000000C","type":"turn.started","session_id":"sess_1","turn_id":"turn_1","ts":"2026-05-08T14:23:11.002Z","actor":"user","payload":{"user_message":null}}}`,
	}
	check := func(t *testing.T, c streamtest.Conn, skipped func() int) {
		t.Helper()
		c.Subscribe(protocol.Filter{EventTypes: []string{"turn.started"}}, nil, false)
		if f := c.Read(readTimeout); f.Ack == nil {
			t.Fatalf("want ack, got %s", f.Raw)
		}
		f := c.Read(readTimeout)
		if f.Event == nil || f.Event.Type != "turn.started" || f.Event.ID != "evt_01J0000000000000000000000C" {
			t.Fatalf("want the known event after the unknown ones, got %s", f.Raw)
		}
		if skipped() != 2 {
			t.Fatalf("skipped %d frames, want 2", skipped())
		}
	}

	t.Run("ws", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer ws.CloseNow()
			ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
			defer cancel()
			if _, _, err := ws.Read(ctx); err != nil { // the subscribe
				return
			}
			for _, f := range frames {
				if ws.Write(ctx, websocket.MessageText, []byte(f)) != nil {
					return
				}
			}
			_, _, _ = ws.Read(ctx) // until the client goes
		}))
		defer srv.Close()

		ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		c := &streamtest.Client{T: t, WS: ws, SessionID: "sess_1", Log: discardLog, AutoPong: true}
		check(t, c, func() int { return c.Skipped })
	})

	t.Run("sse", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i, f := range frames {
				if i > 0 {
					var e struct {
						Event struct{ ID string } `json:"event"`
					}
					servertest.Must(t, json.Unmarshal([]byte(f), &e))
					_, _ = io.WriteString(w, "id: "+e.Event.ID+"\n")
				}
				_, _ = io.WriteString(w, "data: "+f+"\n\n")
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done() // until the client goes
		}))
		defer srv.Close()
		c := streamtest.NewSSE(t, srv.URL, "sess_1", nil)
		c.Log = discardLog
		check(t, c, func() int { return c.Skipped })
		c.Close()
	})
}

// TestProtocolRefusedFrames: a frame the server cannot use gets an error
// frame and the connection keeps working, before and after subscribing:
// an unknown frame type, malformed JSON, a binary frame, a second
// subscribe.
func TestProtocolRefusedFrames(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := streamtest.Attach(t, h.URL, sid)
	refuse := func(frame []byte, code string) {
		t.Helper()
		c.Send(frame)
		expectErrorFrame(t, c, code)
	}
	refuse([]byte(`{"type":"teleport","to":"mars"}`), protocol.CodeUnknownFrameType)
	refuse([]byte(`{"type":"subscribe",`), protocol.CodeInvalidJSON)
	refuse([]byte(`not json at all`), protocol.CodeInvalidJSON)
	refuse([]byte(`[1,2,3]`), protocol.CodeInvalidJSON)
	refuse([]byte(`{"nope":1}`), protocol.CodeInvalidFrame)
	refuse([]byte(`{"type":"cancel"}`), protocol.CodeInvalidFrame)
	refuse([]byte("{\"type\":\"ping\",\"nonce\":\"\xff\"}"), protocol.CodeInvalidJSON)
	if err := c.WS.Write(context.Background(), websocket.MessageBinary, []byte(`{"type":"ping","nonce":"b"}`)); err != nil {
		t.Fatal(err)
	}
	expectErrorFrame(t, c, protocol.CodeInvalidFrame)
	pingPong(t, c, "alive-before-subscribe")

	subscribeOn(t, c, "preset:chat", nil, false)
	refuse([]byte(`{"type":"teleport"}`), protocol.CodeUnknownFrameType)
	refuse([]byte(`{{{`), protocol.CodeInvalidJSON)
	c.Subscribe("preset:full", nil, true)
	expectErrorFrame(t, c, protocol.CodeAlreadySubscribe)
	pingPong(t, c, "alive-after-subscribe")

	// The connection still streams.
	turn := h.Submit(sid, "/echo still streaming")
	until(t, c, event.TurnCompleted, turn)
}

// TestProtocolBackToBackSubscribes: two subscribes sent without waiting
// give exactly one subscribe_ack and one already_subscribed error, in
// whatever order the server decided them, and then the stream.
func TestProtocolBackToBackSubscribes(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	for i := range 20 {
		c := streamtest.Attach(t, h.URL, sid)
		c.Subscribe("preset:chat", nil, false)
		c.Subscribe("preset:chat", nil, false)
		var acks, errs int
		for acks+errs < 2 {
			f := readSkippingPings(t, c)
			switch {
			case f.Ack != nil:
				acks++
			case f.Type == protocol.TypeError && f.Code == protocol.CodeAlreadySubscribe:
				errs++
			default:
				t.Fatalf("attempt %d: unexpected %s", i, f.Raw)
			}
		}
		if acks != 1 || errs != 1 {
			t.Fatalf("attempt %d: %d acks, %d errors", i, acks, errs)
		}
		pingPong(t, c, "ok")
		_ = c.WS.CloseNow()
	}
}

// TestProtocolFrameSizeLimit: a client frame of exactly 1 MiB is read
// (and decoded); one byte more closes the connection with 1009.
func TestProtocolFrameSizeLimit(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := streamtest.Attach(t, h.URL, sid)
	frame := func(n int) []byte {
		head, tail := `{"type":"ping","nonce":"big","pad":"`, `"}`
		return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
	}
	c.Send(frame(protocol.MaxClientFrame))
	f := readFrame(t, c)
	if f.Type != protocol.TypePong || f.Nonce != "big" {
		t.Fatalf("1 MiB frame: got %s", f.Raw)
	}
	c.Send(frame(protocol.MaxClientFrame + 1))
	_, err := c.TryRead(readTimeout)
	if streamtest.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("oversized frame: %v", err)
	}
}

// TestProtocolSubscribeTimeout: a connection that never subscribes is
// closed with 1008 and reason subscribe_timeout. SubscribeTimeout is a
// stream.Config field that config.Config does not carry, so the test
// mounts its own stream.Server on the running server's hub, tokens and
// session manager.
func TestProtocolSubscribeTimeout(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	srv := stream.New(h.Server.Hub, h.Server.Tokens, h.Server.Sessions, stream.Config{SubscribeTimeout: 500 * time.Millisecond})
	mux := http.NewServeMux()
	mux.Handle("GET /sessions/{id}/stream", srv)
	ts := httptest.NewServer(mux)
	// Registered before the clients' cleanups, so it runs after them: a
	// client that is gone does not hold up the close handshake.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		servertest.Must(t, srv.Close(ctx))
		ts.Close()
	})

	dial := func() *streamtest.Client {
		tok := h.Server.Tokens.Issue(sid)
		ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(ts.URL, "http")+"/sessions/"+sid+"/stream?attach="+tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ws.CloseNow() })
		return &streamtest.Client{T: t, WS: ws, SessionID: sid, AutoPong: true, Log: discardLog}
	}

	c := dial()
	start := time.Now()
	pingPong(t, c, "pings do not count as subscribing")
	expectClose(t, c, 1008, "subscribe_timeout")
	if time.Since(start) < 400*time.Millisecond {
		t.Fatalf("closed after %v", time.Since(start))
	}

	// A refused subscribe does not stop the clock either.
	c2 := dial()
	subscribeErr(t, c2, "preset:nope", nil, false)
	expectClose(t, c2, 1008, "subscribe_timeout")

	// A subscribed connection outlives the timeout.
	c3 := dial()
	subscribeOn(t, c3, "preset:chat", nil, false)
	turn := h.Submit(sid, "/echo after the timeout")
	until(t, c3, event.TurnCompleted, turn)
	servertest.WaitFor(t, "the subscribe timeout to pass", func() bool { return time.Since(start) > 1500*time.Millisecond })
	pingPong(t, c3, "subscribed")
}

// TestProtocolSessionNotFound: tokens are issued per existing session,
// so session_not_found cannot be reached through GET /sessions/{id}; a
// token issued directly for a missing session (as if the session had
// vanished between attach and subscribe) upgrades, and the subscribe is
// refused with session_not_found.
func TestProtocolSessionNotFound(t *testing.T) {
	h := servertest.Start(t, "")
	if st := h.Do("GET", "/sessions/sess_missing", nil, nil); st != http.StatusNotFound {
		t.Fatalf("GET a missing session: %d", st)
	}
	tok := h.Server.Tokens.Issue("sess_missing")
	ws, _, err := websocket.Dial(context.Background(), wsURL(h, "sess_missing", tok), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &streamtest.Client{T: t, WS: ws, SessionID: "sess_missing", AutoPong: true, Log: discardLog}
	t.Cleanup(func() { _ = ws.CloseNow() })
	if serr := subscribeErr(t, c, "preset:chat", nil, true); serr.Code != protocol.CodeSessionNotFound {
		t.Fatalf("subscribe_error %+v", serr)
	}
}

// TestAttachTokens: the upgrade needs a fresh token of this session; an
// unknown, reused or other-session token, or none, is refused with 401
// and no upgrade (contract §3).
func TestAttachTokens(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	other := h.CreateSession()
	token := func(id string) string {
		var info struct {
			AttachToken string `json:"attach_token"`
			WSURL       string `json:"ws_url"`
		}
		if st := h.Do("GET", "/sessions/"+id, nil, &info); st != http.StatusOK || !strings.HasPrefix(info.AttachToken, "atk_") ||
			!strings.HasSuffix(info.WSURL, "/sessions/"+id+"/stream?attach="+info.AttachToken) {
			t.Fatalf("attach info %+v (%d)", info, st)
		}
		return info.AttachToken
	}

	used := token(sid)
	ws, _, err := websocket.Dial(context.Background(), wsURL(h, sid, used), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = ws.CloseNow()
	otherTok := token(other)
	for name, u := range map[string]string{
		"unknown":       wsURL(h, sid, "atk_NOTATOKEN"),
		"reused":        wsURL(h, sid, used),
		"other session": wsURL(h, sid, otherTok),
		"missing":       strings.TrimSuffix(wsURL(h, sid, ""), "?attach="),
	} {
		status, body := rawUpgrade(t, u, "", "")
		if status != http.StatusUnauthorized || !strings.Contains(body, "invalid_attach_token") {
			t.Errorf("%s token: %d %s", name, status, body)
		}
	}
	// The other session's token was spent by the refused attempt.
	if status, _ := rawUpgrade(t, wsURL(h, other, otherTok), "", ""); status != http.StatusUnauthorized {
		t.Errorf("a token offered for the wrong session stays usable: %d", status)
	}
	if status, _ := rawUpgrade(t, wsURL(h, other, token(other)), "", ""); status != http.StatusSwitchingProtocols {
		t.Errorf("fresh token: %d", status)
	}
}

// TestUpgradeLocalSafety: an upgrade from another origin ("null", a
// look-alike host, another site) or with a rebinding Host is refused
// with 403 before any upgrade, and without spending the token; the
// server's own origin is accepted (contract §6).
func TestUpgradeLocalSafety(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	var info struct {
		AttachToken string `json:"attach_token"`
	}
	h.Do("GET", "/sessions/"+sid, nil, &info)
	u := wsURL(h, sid, info.AttachToken)
	host := strings.TrimPrefix(h.URL, "http://")
	for _, origin := range []string{"null", "http://localhost.evil.example", "http://evil.example", "http://" + host + ".evil.example", "file://"} {
		if status, body := rawUpgrade(t, u, "", origin); status != http.StatusForbidden || !strings.Contains(body, "forbidden_origin") {
			t.Errorf("Origin %q: %d %s", origin, status, body)
		}
	}
	for _, rebinding := range []string{"evil.example", "evil.example:" + strings.Split(host, ":")[1], "127.0.0.1.evil.example"} {
		if status, body := rawUpgrade(t, u, rebinding, ""); status != http.StatusForbidden || !strings.Contains(body, "forbidden_host") {
			t.Errorf("Host %q: %d %s", rebinding, status, body)
		}
	}
	if status, _ := rawUpgrade(t, u, "", "http://"+host); status != http.StatusSwitchingProtocols {
		t.Errorf("own origin: %d", status)
	}
}

func cancelFrame(turn, reason string) map[string]string {
	f := map[string]string{"type": protocol.TypeCancel, "turn_id": turn}
	if reason != "" {
		f["reason"] = reason
	}
	return f
}

func wsURL(h *servertest.Harness, sid, tok string) string {
	return "ws" + strings.TrimPrefix(h.URL, "http") + "/sessions/" + sid + "/stream?attach=" + tok
}

// rawUpgrade sends a WebSocket upgrade request with an optional Host
// and Origin and returns the status and body; a 101 is closed at once.
func rawUpgrade(t *testing.T, u, host, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http"+strings.TrimPrefix(u, "ws"), nil)
	servertest.Must(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	servertest.Must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestCancelIsScopedToTheSession: a cancel frame names a turn of the
// connection's own session; another session's turn id is refused with
// cancel_failed and that turn runs to completion.
func TestCancelIsScopedToTheSession(t *testing.T) {
	h := servertest.Start(t, "", demoDelay(time.Millisecond))
	victim := h.CreateSession()
	other := h.CreateSession()
	c := streamtest.Attach(t, h.URL, other)
	subscribeOn(t, c, "preset:chat", nil, false)
	turn := h.Submit(victim, "/long 50")
	c.Send(cancelFrame(turn, "not yours"))
	expectErrorFrame(t, c, protocol.CodeCancelFailed)
	h.WaitTurn(victim)
	if n := len(storedEvents(t, h, victim, event.TurnCompleted)); n != 1 {
		t.Fatalf("the other session's turn: %d turn.completed", n)
	}
	if n := len(storedEvents(t, h, victim, event.TurnCancelled)); n != 0 {
		t.Fatalf("the other session's turn was cancelled")
	}
}
