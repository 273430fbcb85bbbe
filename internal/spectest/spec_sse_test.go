package spectest_test

// What only SSE has: its headers and framing, Last-Event-ID, refusals
// as HTTP statuses, the route's guards, and curl as a client. (The close
// event and comment heartbeats are checked in the sse halves of the §11
// tests: slow clients, shutdown, heartbeats.)

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// rawGet sends a GET with extra headers and returns the status, the
// headers and, unless the stream opened (200), the body; an open stream
// is closed at once.
func rawGet(t *testing.T, u string, header http.Header) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	servertest.Must(t, err)
	for k, v := range header {
		if k == "Host" {
			req.Host = v[0]
			continue
		}
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	servertest.Must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, resp.Header, ""
	}
	b, err := io.ReadAll(resp.Body)
	servertest.Must(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// errorBody decodes the JSON error body and checks its media type.
func errorBody(t *testing.T, hdr http.Header, body string) (code, message string) {
	t.Helper()
	if mt, _, _ := mime.ParseMediaType(hdr.Get("Content-Type")); mt != "application/json" {
		t.Fatalf("error with Content-Type %q: %s", hdr.Get("Content-Type"), body)
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("not the JSON error body: %s (%v)", body, err)
	}
	return e.Error.Code, e.Error.Message
}

// TestSSE_WireFormat: the stream opens with 200 and the headers that
// keep proxies from buffering it, sends a retry: field before anything
// else, then each frame exactly as the WebSocket would, one event per
// frame: the ack without an id, the snapshot with its
// snapshot_at_event_id, events with theirs (the client checks every id
// on every read).
func TestSSE_WireFormat(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := streamtest.NewSSE(t, h.URL, sid, nil)
	c.Subscribe("preset:chat", nil, true)
	ack := readSkippingPings(t, c)
	if ack.Ack == nil || c.Retry <= 0 {
		t.Fatalf("first frame %s after a retry of %v", ack.Raw, c.Retry)
	}
	for k, want := range map[string]string{"Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := c.Response.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	snap := readSkippingPings(t, c)
	if snap.Snap == nil || snap.ID != snap.Snap.SnapshotAtEventID || c.LastEventID() != snap.ID {
		t.Fatalf("want the snapshot with its id, got id %q: %s", snap.ID, snap.Raw)
	}
	turn := h.Submit(sid, "what is in my workspace?")
	evs := until(t, c, event.TurnCompleted, turn)
	streamtest.SameIDs(t, "sse", evs, delivered(h, sid, snap.ID, evs[len(evs)-1].ID, streamtest.PresetTypes(event.PresetChat)))
	if c.LastEventID() != evs[len(evs)-1].ID {
		t.Fatalf("last event id %q, want %q", c.LastEventID(), evs[len(evs)-1].ID)
	}
}

// TestSSE_LastEventIDOverridesSince: a client that reconnects as an
// EventSource does (the same URL, plus Last-Event-ID: the last id it
// received) resumes exactly after that id, whatever the URL's since or
// snapshot say: no duplicate of what it had, nothing missing, no second
// snapshot.
func TestSSE_LastEventIDOverridesSince(t *testing.T) {
	h := servertest.Start(t, "", demoDelay(time.Millisecond))
	sid := h.CreateSession()
	created := lastDelivered(h, sid)
	first := h.Submit(sid, "/echo before")
	h.WaitTurn(sid)
	chat := streamtest.PresetTypes(event.PresetChat)

	t.Run("since in the URL", func(t *testing.T) {
		c := streamtest.NewSSE(t, h.URL, sid, nil)
		subscribeOn(t, c, "preset:chat", &created, false)
		until(t, c, event.TurnCompleted, first)
		turn := h.Submit(sid, "what is in my workspace?")
		before := until(t, c, event.ToolCalled, turn)
		cursor := before[len(before)-1].ID
		if c.LastEventID() != cursor {
			t.Fatalf("last event id %q, want %q", c.LastEventID(), cursor)
		}
		c.Close()
		h.WaitTurn(sid)
		end := firstDelivered(t, h, sid, event.TurnCompleted, turn).ID

		c.Resume() // since=<session.created> still in the URL
		ack := readSkippingPings(t, c).Ack
		want := delivered(h, sid, cursor, end, chat)
		if ack == nil || ack.Since == nil || *ack.Since != cursor || ack.Snapshot || ack.ReplayEventCount != len(want) {
			t.Fatalf("resumed with ack %+v, want since %s and %d events", ack, cursor, len(want))
		}
		streamtest.SameIDs(t, "after the resume", until(t, c, event.TurnCompleted, turn), want)
	})

	t.Run("snapshot in the URL", func(t *testing.T) {
		c := streamtest.NewSSE(t, h.URL, sid, nil)
		_, snap := subscribeOn(t, c, "preset:chat", nil, true)
		cursor := c.LastEventID()
		if cursor != snap.SnapshotAtEventID {
			t.Fatalf("last event id %q after the snapshot as of %s", cursor, snap.SnapshotAtEventID)
		}
		c.Close()
		turn := h.Submit(sid, "/echo while away")
		h.WaitTurn(sid)
		end := firstDelivered(t, h, sid, event.TurnCompleted, turn).ID

		c.Resume() // snapshot=true still in the URL
		ack := readSkippingPings(t, c).Ack
		if ack == nil || ack.Snapshot || ack.Since == nil || *ack.Since != cursor {
			t.Fatalf("resumed with ack %+v, want a replay after %s", ack, cursor)
		}
		streamtest.SameIDs(t, "after the resume", until(t, c, event.TurnCompleted, turn), delivered(h, sid, cursor, end, chat))
	})
}

// TestSSE_RefusedBeforeTheStreamOpens: a subscribe the server refuses is
// an HTTP error with the JSON error body, and the status says which
// kind: 404 for a session that does not exist, 400 for a bad filter,
// cursor or query, 410 for an expired cursor and 409 for a replay over
// the limit, both of whose messages tell the client to reconnect with
// snapshot=true; which then works.
func TestSSE_RefusedBeforeTheStreamOpens(t *testing.T) {
	h := servertest.Start(t, "", replayLimit(5))
	sid := h.CreateSession()
	created := lastDelivered(h, sid)
	h.Submit(sid, "/echo enough events for the replay limit")
	h.WaitTurn(sid)
	old := streamtest.IDAt(t, time.Now().Add(-h.Config.Retention-time.Hour))
	stream := h.URL + "/sessions/" + sid + "/events?"
	for _, tc := range []struct {
		name, url string
		status    int
		code      string
		says      string
	}{
		{"unknown session", h.URL + "/sessions/sess_missing/events?preset=chat", http.StatusNotFound, protocol.CodeSessionNotFound, ""},
		{"unknown type", stream + "types=text.delta,made.up.thing", http.StatusBadRequest, protocol.CodeInvalidFilter, "made.up.thing"},
		{"unknown preset", stream + "preset=nope", http.StatusBadRequest, protocol.CodeInvalidFilter, "nope"},
		{"empty type list", stream + "types=", http.StatusBadRequest, protocol.CodeInvalidFilter, ""},
		{"malformed cursor", stream + "since=evt_not-a-ulid", http.StatusBadRequest, protocol.CodeInvalidCursor, ""},
		{"cursor too long", stream + "since=evt_" + strings.Repeat("0", 61), http.StatusBadRequest, api.CodeInvalidRequest, ""},
		{"preset and types", stream + "preset=chat&types=text.delta", http.StatusBadRequest, api.CodeInvalidRequest, ""},
		{"snapshot=maybe", stream + "snapshot=maybe", http.StatusBadRequest, api.CodeInvalidRequest, ""},
		{"expired cursor", stream + "since=" + old, http.StatusGone, protocol.CodeCursorExpired, "snapshot=true"},
		{"replay too large", stream + "since=" + created, http.StatusConflict, protocol.CodeReplayTooLarge, "snapshot=true"},
	} {
		status, hdr, body := rawGet(t, tc.url, nil)
		if status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.status)
			continue
		}
		if code, msg := errorBody(t, hdr, body); code != tc.code || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: %s, want code %s saying %q", tc.name, body, tc.code, tc.says)
		}
	}
	// As told: the same cursors with snapshot=true.
	for _, since := range []string{old, created} {
		c := streamtest.NewSSE(t, h.URL, sid, nil)
		if _, snap := subscribeOn(t, c, "preset:chat", &since, true); len(snap.Messages) != 2 {
			t.Fatalf("snapshot with %d messages", len(snap.Messages))
		}
		c.Close()
	}
}

// TestSSE_MixedTransportsIdenticalStreams: a WebSocket client and an
// SSE client of the same session, with the same subscription, receive
// the same ack (but for its seam: each subscribe is itself an event of
// the session) and byte-identical frames for every event of a turn.
func TestSSE_MixedTransportsIdenticalStreams(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	h.Submit(sid, "/echo some history")
	h.WaitTurn(sid)
	filter := protocol.Filter{EventTypes: []string{"turn.started", "text.delta", "tool.called", "tool.completed", "turn.completed"}}
	conns := []streamtest.Conn{streamtest.Attach(t, h.URL, sid), streamtest.NewSSE(t, h.URL, sid, nil)}
	var acks []protocol.SubscribeAck
	for _, c := range conns {
		ack, _ := subscribeOn(t, c, filter, nil, false)
		ack.SeamEventID = ""
		acks = append(acks, *ack)
	}
	if a, b := protocol.Marshal(acks[0]), protocol.Marshal(acks[1]); string(a) != string(b) {
		t.Fatalf("the acks differ:\nws  %s\nsse %s", a, b)
	}
	turn := h.Submit(sid, "what is in my workspace?")
	frames := make([][]string, len(conns))
	for i, c := range conns {
		for {
			f := readSkippingPings(t, c)
			if f.Event == nil {
				t.Fatalf("%s: %s", c.Transport(), f.Raw)
			}
			frames[i] = append(frames[i], string(f.Raw))
			if streamtest.UntilType(event.TurnCompleted, turn)(f.Event) {
				break
			}
		}
	}
	if !slices.Equal(frames[0], frames[1]) {
		t.Fatalf("the WebSocket got %d frames, SSE %d, or they differ", len(frames[0]), len(frames[1]))
	}
	if len(frames[0]) < 5 {
		t.Fatalf("only %d frames", len(frames[0]))
	}
}

// TestSSE_RouteGuards: the SSE stream is an API route like any other:
// the local-safety guard refuses a foreign Origin or a rebinding Host
// with 403 before anything else, and a server that requires its token
// answers 401 without it.
func TestSSE_RouteGuards(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	u := h.URL + "/sessions/" + sid + "/events?preset=chat"
	host := strings.TrimPrefix(h.URL, "http://")
	for _, tc := range []struct {
		header http.Header
		code   string
	}{
		{http.Header{"Origin": {"null"}}, api.CodeForbiddenOrigin},
		{http.Header{"Origin": {"http://evil.example"}}, api.CodeForbiddenOrigin},
		{http.Header{"Origin": {"http://" + host + ".evil.example"}}, api.CodeForbiddenOrigin},
		{http.Header{"Host": {"evil.example"}}, api.CodeForbiddenHost},
		{http.Header{"Host": {"127.0.0.1.evil.example"}}, api.CodeForbiddenHost},
	} {
		status, hdr, body := rawGet(t, u, tc.header)
		if status != http.StatusForbidden {
			t.Errorf("%v: %d %s", tc.header, status, body)
			continue
		}
		if code, _ := errorBody(t, hdr, body); code != tc.code {
			t.Errorf("%v: %s", tc.header, body)
		}
	}
	if status, _, body := rawGet(t, u, http.Header{"Origin": {"http://" + host}}); status != http.StatusOK {
		t.Errorf("own origin: %d %s", status, body)
	}

	remote := servertest.Start(t, "", func(c *config.Config) { c.PublicName = "metis.example.com" })
	rsid := remote.CreateSession()
	ru := remote.URL + "/sessions/" + rsid + "/events?preset=chat"
	if status, _, body := rawGet(t, ru, nil); status != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s", status, body)
	}
	c := streamtest.NewSSE(t, remote.URL, rsid, nil)
	c.Header.Set("Authorization", "Bearer "+remote.Token)
	subscribeOn(t, c, "preset:chat", nil, false)
	c.Close()
}

// TestSSE_CurlIsAClient: `curl -N` follows a session: the ack's data
// line, then each event with its id: line, as a turn runs.
func TestSSE_CurlIsAClient(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, curl, "-sN", h.URL+"/sessions/"+sid+"/events?"+url.Values{"preset": {"chat"}}.Encode())
	out, err := cmd.StdoutPipe()
	servertest.Must(t, err)
	servertest.Must(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()

	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	var data, ids []string
	var turn string
	for lines.Scan() {
		line := lines.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, v)
		}
		v, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		data = append(data, v)
		if len(data) == 1 {
			turn = h.Submit(sid, "/echo hello curl")
		}
		if strings.Contains(v, `"type":"turn.completed"`) {
			break
		}
	}
	if len(data) < 3 || !strings.HasPrefix(data[0], `{"type":"subscribe_ack"`) {
		t.Fatalf("curl read %d data lines: %q (scan error %v)", len(data), data, lines.Err())
	}
	h.WaitTurn(sid)
	want := streamtest.EventIDs(delivered(h, sid, "", "", streamtest.PresetTypes(event.PresetChat)))
	if !slices.Equal(ids, want[len(want)-len(ids):]) || len(ids) != len(data)-1 || !strings.Contains(data[len(data)-1], turn) {
		t.Fatalf("curl read ids %v for %d events of turn %s", ids, len(data)-1, turn)
	}
}
