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

// Client is one WebSocket connection to the stream.
type Client struct {
	T         testing.TB
	WS        *websocket.Conn
	SessionID string
	Log       *slog.Logger
	// Skipped counts event frames of unknown types.
	Skipped int
	// AutoPong answers server pings (default true).
	AutoPong bool

	lastID string
}

var _ Conn = (*Client)(nil)

// Attach performs the handshake of spec §3.1 against base (http://…)
// and dials the returned ws_url.
func Attach(t testing.TB, base, sessionID string) *Client {
	t.Helper()
	return AttachWith(t, base, sessionID, nil)
}

// AttachWith is Attach dialing through hc (nil: the default client).
func AttachWith(t testing.TB, base, sessionID string, hc *http.Client) *Client {
	t.Helper()
	ws, err := DialWith(context.Background(), base, sessionID, hc, nil)
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
	return DialWith(ctx, base, sessionID, nil, header)
}

// DialWith is Dial with the WebSocket dialed through hc (nil: the
// default client).
func DialWith(ctx context.Context, base, sessionID string, hc *http.Client, header http.Header) (*websocket.Conn, error) {
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
	ws, _, err := websocket.Dial(ctx, info.WSURL, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: header})
	return ws, err
}

// Transport implements Conn.
func (c *Client) Transport() string { return WebSocket.Name }

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
// error when the server closed). A read that times out closes the
// connection (the WebSocket library's rule).
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
		switch f.Type {
		case protocol.TypeEvent:
			if !event.Known(event.Type(f.Event.Type)) {
				c.Skipped++
				c.Log.Debug("skipping event of unknown type", "type", f.Event.Type, "id", f.Event.ID)
				continue
			}
			c.lastID = f.Event.ID
		case protocol.TypeSnapshot:
			c.lastID = f.Snap.SnapshotAtEventID
		case protocol.TypePing:
			if c.AutoPong {
				// Not Send: TryRead reports errors rather than failing the
				// test, and a pong that cannot be written (the server is
				// closing) shows up as the next read's error anyway.
				pong, _ := json.Marshal(protocol.Heartbeat{Type: protocol.TypePong, Nonce: f.Nonce})
				_ = c.WS.Write(context.Background(), websocket.MessageText, pong)
			}
		}
		return f, nil
	}
}

// Events reads frames until pred returns true for an event (inclusive)
// and returns the events read, failing on any non-event frame other
// than pings.
func (c *Client) Events(timeout time.Duration, until func(*protocol.EventEnvelope) bool) []*protocol.EventEnvelope {
	c.T.Helper()
	return eventsOf(c.T, c, timeout, until)
}

// LastEventID implements Conn.
func (c *Client) LastEventID() string { return c.lastID }

// Close implements Conn.
func (c *Client) Close() { _ = c.WS.CloseNow() }
