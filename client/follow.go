package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/protocol"
)

// UpdateKind tells what happened.
type UpdateKind int

// Update kinds.
const (
	// Subscribed: the stream is attached (after the ack and the snapshot
	// or replay are applied). Resumed tells a reconnect from a fresh
	// attach.
	Subscribed UpdateKind = iota + 1
	// EventApplied: Event was folded into View.
	EventApplied
	// Reconnecting: the connection dropped; Err says why, Attempt counts.
	Reconnecting
	// Resynced: the server could not replay the gap; View was rebuilt
	// from a fresh snapshot.
	Resynced
)

// Update is passed to FollowOptions.OnUpdate. View is the live view: it
// may be read during the callback only (Clone it to keep it).
type Update struct {
	Kind    UpdateKind
	Event   *protocol.EventEnvelope
	View    *View
	Err     error
	Attempt int
	Resumed bool
}

// FollowOptions configure Follow.
type FollowOptions struct {
	// Filter is a preset name or a protocol.Filter (default preset:chat).
	Filter any
	// Since resumes after this event id instead of starting with a
	// snapshot.
	Since string
	// NoSnapshot starts without a snapshot (and without replay unless
	// Since is set): only live events.
	NoSnapshot bool
	// OnUpdate receives every update, on Follow's goroutine.
	OnUpdate func(Update)
	// MinBackoff and MaxBackoff bound reconnect waits (100ms, 5s).
	MinBackoff, MaxBackoff time.Duration
	// View to fold into (default a new one); handy for tests.
	View *View
}

// ErrSessionGone is returned by Follow when the session does not exist.
var ErrSessionGone = errors.New("metis: the session does not exist")

// Follow attaches to a session's stream and folds it into a View until
// ctx is done, reconnecting after any drop with the last event id as the
// cursor (at once after a close that asks for a replay: client_too_slow,
// storage_failure, resync, owner_changed; else with backoff). When the
// server answers cursor_expired or replay_too_large, or
// reports a streaming gap, Follow resubscribes with a fresh snapshot.
// Server pings are answered; unknown event types are skipped. It returns
// ctx's error, ErrSessionGone, a 401 (the server needs a token: see
// Client.Token), or a subscribe refusal it cannot recover from (an
// invalid filter).
func (c *Client) Follow(ctx context.Context, sessionID string, opts FollowOptions) error {
	if opts.Filter == nil {
		opts.Filter = protocol.PresetChat
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	v := opts.View
	if v == nil {
		v = NewView(c.Logger)
	}
	emit := func(u Update) {
		if opts.OnUpdate != nil {
			u.View = v
			opts.OnUpdate(u)
		}
	}
	since, fresh := opts.Since, !opts.NoSnapshot && opts.Since == ""
	if since != "" {
		v.LastEventID = since
	}
	attempt := 0
	for {
		err := c.followOnce(ctx, sessionID, opts.Filter, v, &since, &fresh, attempt > 0, emit, &attempt)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var perm *permanentError
		switch {
		case errors.As(err, &perm):
			return perm.err
		case IsNotFound(err):
			return ErrSessionGone
		case IsUnauthorized(err): // retrying cannot fix a missing or wrong token
			return err
		}
		attempt++
		emit(Update{Kind: Reconnecting, Err: err, Attempt: attempt})
		wait := backoff(attempt, opts.MinBackoff, opts.MaxBackoff)
		if replayAtOnce(err) {
			wait = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// replayAtOnce reports whether the server closed the stream asking for
// a replay right away: its queue overflowed (client_too_slow), an event
// of the session could not be stored (storage_failure), events could
// not be delivered live (resync), or, in cluster mode, another node runs
// the session now (owner_changed).
func replayAtOnce(err error) bool {
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != protocol.ClosePolicyViolation {
		return false
	}
	var r protocol.CloseReason
	if json.Unmarshal([]byte(ce.Reason), &r) != nil {
		return false
	}
	switch r.Code {
	case protocol.ReasonClientTooSlow.Code, protocol.ReasonStorageFailure.Code, protocol.ReasonResync.Code,
		protocol.ReasonOwnerChanged.Code:
		return true
	}
	return false
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }

// backoff is exponential with full jitter between half and the bound.
func backoff(attempt int, lo, hi time.Duration) time.Duration {
	d := lo << min(attempt-1, 20)
	if d > hi || d <= 0 {
		d = hi
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// followOnce runs one connection. It returns when the connection ends.
func (c *Client) followOnce(ctx context.Context, sid string, filter any, v *View, since *string, fresh *bool,
	resumed bool, emit func(Update), attempt *int) error {
	a, err := c.Attach(ctx, sid)
	if err != nil {
		return err
	}
	header := http.Header{}
	if c.Token != "" && c.socket == "" && !sameServer(c.BaseURL, a.WSURL) {
		// The token goes to this server only, never to wherever an
		// answer points (over a socket the transport dials the socket
		// whatever the URL says).
		return &permanentError{fmt.Errorf("metis: the stream URL %q is not on the server %s: refusing to send the token there", a.WSURL, c.BaseURL)}
	}
	c.authorize(header)
	var transport http.RoundTripper
	if c.HTTP != nil {
		transport = c.HTTP.Transport
	}
	ws, _, err := websocket.Dial(ctx, a.WSURL, &websocket.DialOptions{HTTPHeader: header,
		HTTPClient: &http.Client{Transport: transport, Timeout: 10 * time.Second}})
	if err != nil {
		return fmt.Errorf("metis: dial stream: %w", err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(256 << 20) // snapshots and replays can be large

	send := func(v any) error {
		b, _ := json.Marshal(v)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return ws.Write(wctx, websocket.MessageText, b)
	}
	subscribe := func() error {
		var sinceArg *string
		if !*fresh && *since != "" {
			s := *since
			sinceArg = &s
		}
		return send(map[string]any{"type": protocol.TypeSubscribe, "filter": filter, "since": sinceArg, "snapshot": *fresh})
	}
	if err := subscribe(); err != nil {
		return err
	}
	replayLeft := -1 // events still to come before the stream is live; -1 before the ack
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return err
		}
		f, err := protocol.DecodeServerFrame(data)
		if err != nil {
			switch f.Type {
			case protocol.TypeSnapshot, protocol.TypeSubscribeAck, protocol.TypeSubscribeError:
				return err // the subscribe cannot go on from it: reconnect
			}
			c.Logger.Debug("server frame skipped", "err", err)
			continue
		}
		switch f.Type {
		case protocol.TypeSubscribeAck:
			ack := f.Ack
			if ack.StreamingGap {
				// Some deltas after the cursor are gone: rebuild from a
				// snapshot on a fresh connection.
				*fresh = true
				emit(Update{Kind: Resynced})
				return errors.New("metis: streaming gap; resubscribing with a snapshot")
			}
			replayLeft = ack.ReplayEventCount
			if !ack.Snapshot && ack.SeamEventID > v.LastEventID && replayLeft == 0 {
				// Live from here: resume after the seam if we drop before
				// the first event.
				v.LastEventID = ack.SeamEventID
				*since = v.LastEventID
			}
			if !ack.Snapshot && replayLeft == 0 {
				*attempt = 0
				emit(Update{Kind: Subscribed, Resumed: resumed})
			}
		case protocol.TypeSubscribeError:
			se := f.SubErr
			switch se.Code {
			case protocol.CodeCursorExpired, protocol.CodeReplayTooLarge, protocol.CodeInvalidCursor:
				*fresh = true
				emit(Update{Kind: Resynced})
				if err := subscribe(); err != nil {
					return err
				}
			case protocol.CodeSessionNotFound:
				return ErrSessionGone
			default:
				return &permanentError{fmt.Errorf("metis: subscribe refused: %s: %s", se.Code, se.Message)}
			}
		case protocol.TypeSnapshot:
			v.ApplySnapshot(f.Snapshot)
			*fresh, *since = false, v.LastEventID
			*attempt = 0
			emit(Update{Kind: Subscribed, Resumed: resumed})
		case protocol.TypeEvent:
			v.Apply(f.Event)
			*since = v.LastEventID
			emit(Update{Kind: EventApplied, Event: f.Event})
			if replayLeft > 0 {
				if replayLeft--; replayLeft == 0 {
					*attempt = 0
					emit(Update{Kind: Subscribed, Resumed: resumed})
				}
			}
		case protocol.TypePing:
			if err := send(protocol.Heartbeat{Type: protocol.TypePong, Nonce: f.Heartbeat.Nonce}); err != nil {
				return err
			}
		case protocol.TypeError:
			c.Logger.Debug("server refused a frame", "frame", string(data))
		}
	}
}

// sameServer reports whether the stream URL ws is on the server at base:
// ws:// for http://, wss:// for https://, the same host and port
// (default ports spelled or not).
func sameServer(base, ws string) bool {
	b, err1 := url.Parse(base)
	w, err2 := url.Parse(ws)
	if err1 != nil || err2 != nil {
		return false
	}
	want := map[string]string{"http": "ws", "https": "wss"}[strings.ToLower(b.Scheme)]
	if want == "" || strings.ToLower(w.Scheme) != want {
		return false
	}
	return strings.EqualFold(b.Hostname(), w.Hostname()) && portOf(b) == portOf(w)
}

// portOf is u's port, the scheme's default when none is given.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https", "wss":
		return "443"
	}
	return "80"
}
