// Package streamtest is a small WebSocket client of the metis stream for
// tests and benchmarks: attach (GET /sessions/{id} then dial ws_url),
// subscribe, and read decoded frames. Event frames of a type the client
// does not know are skipped with a debug log, as spec §9.2 asks of every
// client.
//
// Only tests import it.
package streamtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// Frame is one decoded server frame.
type Frame struct {
	Type  string
	Raw   []byte
	Event *protocol.EventEnvelope // event frames
	Ack   *protocol.SubscribeAck  // subscribe_ack
	Err   *protocol.SubscribeError
	Snap  *protocol.Snapshot
	Nonce string // ping, pong
	Code  string // error frames
}

// Client is one stream connection.
type Client struct {
	T         testing.TB
	WS        *websocket.Conn
	SessionID string
	Log       *slog.Logger
	// Skipped counts event frames of unknown types.
	Skipped int
	// AutoPong answers server pings (default true).
	AutoPong bool
}

// Attach performs the handshake of spec §3.1 against base (http://…)
// and dials the returned ws_url.
func Attach(t testing.TB, base, sessionID string) *Client {
	t.Helper()
	ws, err := Dial(context.Background(), base, sessionID, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{T: t, WS: ws, SessionID: sessionID, Log: slog.Default(), AutoPong: true}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return c
}

// Dial fetches an attach token and dials the stream with extra headers.
func Dial(ctx context.Context, base, sessionID string, header http.Header) (*websocket.Conn, error) {
	resp, err := http.Get(base + "/sessions/" + sessionID)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /sessions/%s: %s", sessionID, resp.Status)
	}
	var info struct {
		WSURL string `json:"ws_url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, err
	}
	ws, _, err := websocket.Dial(ctx, info.WSURL, &websocket.DialOptions{HTTPHeader: header})
	return ws, err
}

// Send writes a client frame (any JSON-encodable value, or raw bytes).
func (c *Client) Send(v any) {
	c.T.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			c.T.Fatal(err)
		}
	}
	if err := c.WS.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.T.Fatalf("send: %v", err)
	}
}

// Subscribe sends a subscribe frame. filter is a preset name or a
// protocol.Filter.
func (c *Client) Subscribe(filter any, since *string, snapshot bool) {
	c.T.Helper()
	c.Send(map[string]any{"type": "subscribe", "filter": filter, "since": since, "snapshot": snapshot})
}

// Read returns the next frame, skipping unknown event types and
// answering pings when AutoPong is set. It fails the test on timeout or
// connection error.
func (c *Client) Read(timeout time.Duration) Frame {
	c.T.Helper()
	f, err := c.TryRead(timeout)
	if err != nil {
		c.T.Fatalf("read: %v", err)
	}
	return f
}

// TryRead is Read returning the error (a *websocket.CloseError-wrapping
// error when the server closed).
func (c *Client) TryRead(timeout time.Duration) (Frame, error) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		typ, data, err := c.WS.Read(ctx)
		cancel()
		if err != nil {
			return Frame{}, err
		}
		if typ != websocket.MessageText {
			return Frame{}, errors.New("binary frame from the server")
		}
		f, err := Decode(data)
		if err != nil {
			return Frame{}, err
		}
		if f.Type == protocol.TypeEvent && !event.Known(event.Type(f.Event.Type)) {
			c.Skipped++
			c.Log.Debug("skipping event of unknown type", "type", f.Event.Type, "id", f.Event.ID)
			continue
		}
		if f.Type == protocol.TypePing && c.AutoPong {
			// Not Send: TryRead reports errors rather than failing the
			// test, and a pong that cannot be written (the server is
			// closing) shows up as the next read's error anyway.
			pong, _ := json.Marshal(protocol.Heartbeat{Type: protocol.TypePong, Nonce: f.Nonce})
			_ = c.WS.Write(context.Background(), websocket.MessageText, pong)
		}
		return f, nil
	}
}

// Decode decodes one server frame.
func Decode(data []byte) (Frame, error) {
	var head struct {
		Type  string `json:"type"`
		Nonce string `json:"nonce"`
		Code  string `json:"code"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Frame{}, fmt.Errorf("decode frame %q: %w", data, err)
	}
	f := Frame{Type: head.Type, Raw: data, Nonce: head.Nonce, Code: head.Code}
	var err error
	switch head.Type {
	case protocol.TypeEvent:
		var w struct {
			Event protocol.EventEnvelope `json:"event"`
		}
		err = json.Unmarshal(data, &w)
		f.Event = &w.Event
	case protocol.TypeSubscribeAck:
		f.Ack = new(protocol.SubscribeAck)
		err = json.Unmarshal(data, f.Ack)
	case protocol.TypeSubscribeError:
		f.Err = new(protocol.SubscribeError)
		err = json.Unmarshal(data, f.Err)
	case protocol.TypeSnapshot:
		f.Snap = new(protocol.Snapshot)
		err = json.Unmarshal(data, f.Snap)
	}
	return f, err
}

// Events reads frames until pred returns true for an event (inclusive)
// and returns the events read, failing on any non-event frame other
// than pings.
func (c *Client) Events(timeout time.Duration, until func(*protocol.EventEnvelope) bool) []*protocol.EventEnvelope {
	c.T.Helper()
	var out []*protocol.EventEnvelope
	for {
		f := c.Read(timeout)
		switch f.Type {
		case protocol.TypePing, protocol.TypePong:
			continue
		case protocol.TypeEvent:
			out = append(out, f.Event)
			if until(f.Event) {
				return out
			}
		default:
			c.T.Fatalf("unexpected %s frame while reading events: %s", f.Type, f.Raw)
		}
	}
}

// UntilType returns a predicate matching an event type (and turn, if
// turn is not empty).
func UntilType(typ event.Type, turn string) func(*protocol.EventEnvelope) bool {
	return func(e *protocol.EventEnvelope) bool {
		return e.Type == string(typ) && (turn == "" || (e.TurnID != nil && *e.TurnID == turn))
	}
}

// CloseStatus returns the close code of a read error (-1 if none).
func CloseStatus(err error) websocket.StatusCode { return websocket.CloseStatus(err) }
