package benchtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/coder/websocket"
)

// ErrNotFound is Attach's error (wrapped) when the server answers 404:
// a cluster node that just started shows a session once its projection
// applied it.
var ErrNotFound = errors.New("no such session (yet)")

// Attach performs GET {base}/sessions/{sid} and returns the ws_url of
// its answer.
func Attach(ctx context.Context, hc *http.Client, base, sid string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sessions/"+sid, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return "", fmt.Errorf("GET %s/sessions/%s: %w", base, sid, ErrNotFound)
	default:
		return "", fmt.Errorf("GET %s/sessions/%s: %s", base, sid, resp.Status)
	}
	var info struct {
		WSURL string `json:"ws_url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return "", fmt.Errorf("GET %s/sessions/%s: %w", base, sid, err)
	}
	return info.WSURL, nil
}

// Subscribe opens the WebSocket at wsURL, subscribes without a
// snapshot to the event types (and since, if not empty), reads the
// answer and returns the connection and the raw subscribe_ack.
func Subscribe(ctx context.Context, wsURL string, types []string, since string) (*websocket.Conn, []byte, error) {
	ws, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		return nil, nil, err
	}
	sub := map[string]any{"type": "subscribe", "filter": map[string]any{"event_types": types}, "snapshot": false, "since": nil}
	if since != "" {
		sub["since"] = since
	}
	b, err := json.Marshal(sub)
	if err == nil {
		err = ws.Write(ctx, websocket.MessageText, b)
	}
	var ack []byte
	if err == nil {
		_, ack, err = ws.Read(ctx)
	}
	if err == nil && !bytes.Contains(ack, []byte(`"subscribe_ack"`)) {
		err = fmt.Errorf("want subscribe_ack, got %s", ack)
	}
	if err != nil {
		ws.CloseNow()
		return nil, nil, err
	}
	return ws, ack, nil
}

// Dial is Attach then Subscribe: a client of session sid of the server
// at base, subscribed to the event types (and since, if not empty).
func Dial(ctx context.Context, hc *http.Client, base, sid string, types []string, since string) (*websocket.Conn, []byte, error) {
	u, err := Attach(ctx, hc, base, sid)
	if err != nil {
		return nil, nil, err
	}
	return Subscribe(ctx, u, types, since)
}
