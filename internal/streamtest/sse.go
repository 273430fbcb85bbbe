package streamtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// ErrNoClose is the error TryRead returns when an SSE response ended
// without a close event first (as a WebSocket torn down without a close
// frame).
var ErrNoClose = errors.New("sse: the stream ended without a close event")

// headerTimeout bounds the wait for an SSE response's headers.
const headerTimeout = 15 * time.Second

// SSEClient is a client of GET /sessions/{id}/events. Each Subscribe is
// one request; its answer is either an error status with the JSON error
// body (handed back by the next read as a subscribe_error frame, with
// Frame.Status) or the stream. It checks the stream's framing on every
// read: event frames carry their event's id in id:, a snapshot its
// snapshot_at_event_id, the ack none; a close event is the last thing
// before the end of the response.
type SSEClient struct {
	T         testing.TB
	Base      string
	SessionID string
	HTTP      *http.Client
	// Header is sent with every request (an Origin, a token).
	Header http.Header
	Log    *slog.Logger
	// Skipped counts event frames of unknown types.
	Skipped int
	// Response is the open (or last) response; its body belongs to the
	// client.
	Response *http.Response
	// Retry is the last retry: field read (0: none yet).
	Retry time.Duration
	// Comments counts the comment lines read (heartbeats); LastComment
	// is the text of the last one.
	Comments    int
	LastComment string

	query   url.Values
	lastID  string
	pending *Frame // a refused subscribe, for the next read
	end     error  // sticky once the stream has ended
	closed  *Frame // the close event, once read

	// The open response's reader goroutine: it parses records into recs
	// (unbuffered, so a client that stops reading stops the reader and
	// the server's writes back up) and sets readErr before closing it.
	recs    chan sseRecord
	readErr error
	stop    context.CancelFunc
	done    chan struct{}
	once    *sync.Once
	dropped atomic.Bool // Close was called on the open response
}

var _ Conn = (*SSEClient)(nil)

// NewSSE returns an SSE client of a session's stream on the server at
// base; hc nil is the default HTTP client. Nothing is sent before
// Subscribe. The open response is closed when the test ends.
func NewSSE(t testing.TB, base, sessionID string, hc *http.Client) *SSEClient {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := &SSEClient{T: t, Base: base, SessionID: sessionID, HTTP: hc, Header: http.Header{}, Log: slog.Default()}
	t.Cleanup(c.Close)
	return c
}

// Transport implements Conn.
func (c *SSEClient) Transport() string { return SSE.Name }

// Query is the query string of a subscription: filter is a preset name
// ("preset:chat" → preset=chat), a protocol.Filter (types=, actors=,
// include_worker_sessions=true; a nil list is left out, an empty one is
// sent empty), or nil.
func Query(filter any, since *string, snapshot bool) url.Values {
	q := url.Values{}
	switch f := filter.(type) {
	case nil:
	case string:
		q.Set("preset", strings.TrimPrefix(f, "preset:"))
	case protocol.Filter:
		if f.EventTypes != nil {
			q.Set("types", strings.Join(f.EventTypes, ","))
		}
		if f.Actors != nil {
			q.Set("actors", strings.Join(f.Actors, ","))
		}
		if f.IncludeWorkerSessions {
			q.Set("include_worker_sessions", "true")
		}
	default:
		panic(fmt.Sprintf("streamtest: a filter is a preset name or a protocol.Filter, not %T", filter))
	}
	if since != nil {
		q.Set("since", *since)
	}
	if snapshot {
		q.Set("snapshot", "true")
	}
	return q
}

// Subscribe implements Conn: it requests the stream with the
// subscription in the query.
func (c *SSEClient) Subscribe(filter any, since *string, snapshot bool) {
	c.T.Helper()
	if c.recs != nil && c.end == nil && !c.dropped.Load() {
		c.T.Fatal("sse: subscribe while a stream is open; Close or Resume first")
	}
	c.Open(Query(filter, since, snapshot), "")
}

// Resume reconnects as an EventSource does: the same query, with
// Last-Event-ID set to the last id received (when there is one).
func (c *SSEClient) Resume() {
	c.T.Helper()
	c.Close()
	c.Open(c.query, c.lastID)
}

// Open requests the stream with a query and, if not empty, a
// Last-Event-ID header, closing the response still open, if any.
func (c *SSEClient) Open(q url.Values, lastEventID string) {
	c.T.Helper()
	c.Close()
	c.query, c.pending, c.end, c.closed, c.recs, c.readErr = q, nil, nil, nil, nil, nil
	ctx, stop := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(q), nil)
	if err != nil {
		stop()
		c.T.Fatal(err)
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	timer := time.AfterFunc(headerTimeout, stop)
	resp, err := c.HTTP.Do(req)
	timer.Stop()
	if err != nil {
		stop()
		c.T.Fatalf("GET %s: %v", req.URL, err)
	}
	c.Response = resp
	if resp.StatusCode != http.StatusOK {
		defer stop()
		defer resp.Body.Close()
		f, err := refusal(resp)
		if err != nil {
			c.T.Fatalf("GET %s: %v", req.URL, err)
		}
		c.pending = &f
		return
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		stop()
		resp.Body.Close()
		c.T.Fatalf("GET %s: 200 with Content-Type %q", req.URL, resp.Header.Get("Content-Type"))
	}
	c.recs, c.stop, c.done, c.once = make(chan sseRecord), stop, make(chan struct{}), new(sync.Once)
	c.dropped.Store(false)
	go c.read(ctx, resp.Body, c.recs, c.done)
}

// URL is the stream's address with a query.
func (c *SSEClient) URL(q url.Values) string {
	u := c.Base + "/sessions/" + url.PathEscape(c.SessionID) + "/events"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// refusal turns an error status with the JSON error body into a
// subscribe_error frame.
func refusal(resp *http.Response) (Frame, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Frame{}, fmt.Errorf("%s: reading the body: %w", resp.Status, err)
	}
	var body struct {
		Error *struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Offending string `json:"offending"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || body.Error == nil || body.Error.Code == "" {
		return Frame{}, fmt.Errorf("%s with %q: not the JSON error body", resp.Status, raw)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return Frame{}, fmt.Errorf("%s with Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	e := body.Error
	return Frame{
		Type:   protocol.TypeSubscribeError,
		Raw:    raw,
		Err:    &protocol.SubscribeError{Type: protocol.TypeSubscribeError, Code: e.Code, Message: e.Message, Offending: e.Offending},
		Status: resp.StatusCode,
	}, nil
}

// read is the reader goroutine of one response.
func (c *SSEClient) read(ctx context.Context, body io.ReadCloser, recs chan<- sseRecord, done chan<- struct{}) {
	defer close(done)
	defer body.Close()
	p := newSSEReader(body)
	for {
		rec, err := p.next()
		if err != nil {
			c.readErr = err
			close(recs)
			return
		}
		select {
		case recs <- rec:
		case <-ctx.Done():
			c.readErr = ctx.Err()
			close(recs)
			return
		}
	}
}

// Read implements Conn.
func (c *SSEClient) Read(timeout time.Duration) Frame {
	c.T.Helper()
	f, err := c.TryRead(timeout)
	if err != nil {
		c.T.Fatalf("read: %v", err)
	}
	return f
}

// TryRead implements Conn. Comments and retry: fields are taken in
// passing (Comments, Retry). After a close event it waits for the end
// of the response and returns an *EndError; a response that ends
// without one gives ErrNoClose.
func (c *SSEClient) TryRead(timeout time.Duration) (Frame, error) {
	if f := c.pending; f != nil {
		c.pending = nil
		return *f, nil
	}
	if c.end != nil {
		return Frame{}, c.end
	}
	if c.recs == nil {
		return Frame{}, errors.New("sse: read before subscribe")
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		var rec sseRecord
		var ok bool
		select {
		case rec, ok = <-c.recs:
		case <-timer.C:
			return Frame{}, fmt.Errorf("sse: no frame within %v: %w", timeout, context.DeadlineExceeded)
		}
		if !ok {
			c.end = c.ended()
			return Frame{}, c.end
		}
		switch rec.kind {
		case recComment:
			c.Comments++
			c.LastComment = rec.comment
			continue
		case recRetry:
			c.Retry = time.Duration(rec.retry) * time.Millisecond
			continue
		}
		f, err := c.frame(rec)
		if err != nil {
			c.end = err
			return Frame{}, err
		}
		if f.Type == protocol.TypeEvent && !event.Known(event.Type(f.Event.Type)) {
			c.Skipped++
			c.Log.Debug("skipping event of unknown type", "type", f.Event.Type, "id", f.Event.ID)
			continue
		}
		if f.Close != nil {
			c.closed = &f
			continue // the end of the response must follow
		}
		return f, nil
	}
}

// frame decodes an SSE event into a frame and checks its id: field.
func (c *SSEClient) frame(rec sseRecord) (Frame, error) {
	if c.closed != nil {
		return Frame{}, fmt.Errorf("sse: %q after the close event", rec.data)
	}
	if rec.typ != "message" {
		return Frame{}, fmt.Errorf("sse: an event: field (%q); the stream's events are unnamed", rec.typ)
	}
	f, err := Decode([]byte(rec.data))
	if err != nil {
		return Frame{}, err
	}
	if rec.hasID {
		f.ID = rec.id
	}
	var want string // the id: the frame must carry ("" for none)
	switch f.Type {
	case protocol.TypeEvent:
		want = f.Event.ID
	case protocol.TypeSnapshot:
		want = f.Snap.SnapshotAtEventID
	}
	if f.Type != protocol.TypeClose && (rec.hasID != (want != "") || f.ID != want) {
		return Frame{}, fmt.Errorf("sse: %s frame with id: %q (present %v), want %q", f.Type, f.ID, rec.hasID, want)
	}
	c.lastID = rec.id
	return f, nil
}

// ended is the error that ends the stream once the reader is done.
func (c *SSEClient) ended() error {
	<-c.done
	err := c.readErr
	switch {
	case c.closed != nil && errors.Is(err, io.EOF):
		var raw struct {
			Reason json.RawMessage `json:"reason"`
		}
		_ = json.Unmarshal(c.closed.Raw, &raw) // it decoded once already
		return &EndError{End: End{Code: c.closed.Close.Code, Reason: string(raw.Reason)}}
	case errors.Is(err, io.EOF):
		return ErrNoClose
	case c.closed != nil:
		return fmt.Errorf("sse: after the close event: %w", err)
	default:
		return fmt.Errorf("sse: %w", err)
	}
}

// Events implements Conn.
func (c *SSEClient) Events(timeout time.Duration, until func(*protocol.EventEnvelope) bool) []*protocol.EventEnvelope {
	c.T.Helper()
	return eventsOf(c.T, c, timeout, until)
}

// LastEventID implements Conn: the SSE stream's last event id, which an
// EventSource would send as Last-Event-ID.
func (c *SSEClient) LastEventID() string { return c.lastID }

// Close implements Conn: it drops the open response, if any.
func (c *SSEClient) Close() {
	if c.once == nil {
		return
	}
	c.once.Do(func() {
		c.dropped.Store(true)
		c.stop()
		<-c.done
	})
}
