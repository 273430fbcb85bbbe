// Package client is the Go client of a metis server: the HTTP API of
// contract §3 and the live stream of the streaming protocol, with a
// reducer that keeps a session's materialized View from a snapshot and
// the events that follow, and a Follow loop that reconnects
// transparently (cursor replay, exponential backoff with jitter, a fresh
// snapshot when the server cannot replay).
//
// A complete program that starts a turn and prints the answer as it
// streams:
//
//	c := client.New("http://127.0.0.1:8421")
//	ctx := context.Background()
//	s, _ := c.CreateSession(ctx, "/path/to/workspace", "")
//	turn := ""
//	ctx, stop := context.WithCancel(ctx)
//	err := c.Follow(ctx, s.ID, client.FollowOptions{
//		OnUpdate: func(u client.Update) {
//			switch {
//			case u.Kind == client.Subscribed && turn == "":
//				turn, _ = c.Submit(ctx, s.ID, "What is in this workspace?")
//			case u.Kind == client.EventApplied && u.Event.Type == string(protocol.EventTextDelta):
//				var p struct{ Text string `json:"text"` }
//				json.Unmarshal(u.Event.Payload, &p)
//				fmt.Print(p.Text)
//			case u.Kind == client.EventApplied && u.View.Turn.ID == turn && u.View.Turn.Status != protocol.TurnStatusInFlight:
//				stop()
//			}
//		},
//	})
//
// client imports protocol and nothing else from metis; it is safe to
// import from other programs.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// Client talks to one metis server.
type Client struct {
	BaseURL string
	HTTP    *http.Client // its Transport also dials the stream (TLS settings included)
	Logger  *slog.Logger
	// Token is the server's bearer token, sent as "Authorization: Bearer"
	// on every request and on the stream's WebSocket upgrade. A server
	// bound to loopback needs none; one reachable from the network
	// refuses requests without it (401). Follow sends it only to a
	// stream URL on BaseURL's own host and port, with the matching
	// scheme (ws for http, wss for https), or over the unix socket: an
	// answer pointing elsewhere is an error, not a place to send it.
	Token string

	socket string // the unix socket's path, "" over TCP (socket.go)
}

// New returns a client of the server at baseURL: http://host:port,
// https://host:port, or unix:///path/to/metis.sock for the server's
// unix socket (see NewSocket).
func New(baseURL string) *Client {
	if c, ok := newFromURL(baseURL); ok {
		return c
	}
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}, Logger: slog.Default()}
}

// APIError is an error answer of the HTTP API.
type APIError struct {
	Status  int
	Code    string
	Message string
	// Body is the answer's body (a 409 approval_resolved carries the
	// resolution that won: see ResolvedError).
	Body json.RawMessage
}

func (e *APIError) Error() string {
	return fmt.Sprintf("metis: %d %s: %s", e.Status, e.Code, e.Message)
}

// Session is a session summary (contract §3).
type Session = protocol.SessionSummary

// Attach is the answer of GET /sessions/{id} (spec §3.1).
type Attach = protocol.AttachInfo

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req.Header)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("metis: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("metis: %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return apiErrorOf(resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("metis: %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// CreateSession creates a session on an absolute workspace directory;
// model "" takes the server's default.
func (c *Client) CreateSession(ctx context.Context, workspace, model string) (Session, error) {
	var s Session
	err := c.do(ctx, http.MethodPost, "/sessions", map[string]string{"workspace_path": workspace, "model": model}, &s)
	return s, err
}

// Attach fetches a session's summary and a single-use attach token.
func (c *Client) Attach(ctx context.Context, sessionID string) (Attach, error) {
	var a Attach
	err := c.do(ctx, http.MethodGet, "/sessions/"+url.PathEscape(sessionID), nil, &a)
	return a, err
}

// Submit starts a turn and returns its id.
func (c *Client) Submit(ctx context.Context, sessionID, content string) (string, error) {
	var out struct {
		TurnID string `json:"turn_id"`
	}
	err := c.do(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/turns", map[string]string{"content": content}, &out)
	return out.TurnID, err
}

// Cancel cancels a turn (idempotent).
func (c *Client) Cancel(ctx context.Context, sessionID, turnID, reason string) error {
	return c.do(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/turns/"+url.PathEscape(turnID)+"/cancel",
		map[string]string{"reason": reason}, nil)
}

// Messages returns a page of history before a message id ("" for the
// newest), oldest first, and whether older ones exist.
func (c *Client) Messages(ctx context.Context, sessionID, before string, limit int) ([]json.RawMessage, bool, error) {
	q := url.Values{}
	if before != "" {
		q.Set("before", before)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Messages []json.RawMessage `json:"messages"`
		HasMore  bool              `json:"has_more"`
	}
	err := c.do(ctx, http.MethodGet, "/sessions/"+url.PathEscape(sessionID)+"/messages?"+q.Encode(), nil, &out)
	return out.Messages, out.HasMore, err
}

// authorize adds the bearer token, if any, to h.
func (c *Client) authorize(h http.Header) {
	if c.Token != "" {
		h.Set("Authorization", "Bearer "+c.Token)
	}
}

// IsUnauthorized reports whether err is a 401 of the API: the server
// needs its token, or refused the one sent.
func IsUnauthorized(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusUnauthorized
}

// IsNotFound reports whether err is a 404 of the API.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// apiErrorOf decodes an error answer.
func apiErrorOf(status int, raw []byte) *APIError {
	var e protocol.HTTPError
	_ = json.Unmarshal(raw, &e)
	return &APIError{Status: status, Code: e.Error.Code, Message: e.Error.Message, Body: raw}
}
