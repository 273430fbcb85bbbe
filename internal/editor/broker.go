package editor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// Methods of a request, named as ACP names them.
const (
	MethodReadTextFile  = protocol.EditorReadTextFile
	MethodWriteTextFile = protocol.EditorWriteTextFile
)

// DefaultTimeout is how long a request waits for the editor's answer
// before the tool uses the disk instead.
const DefaultTimeout = 15 * time.Second

// QueueSize bounds the requests an attachment holds before its client
// took them; past it, a request fails at once (ErrBusy).
const QueueSize = 16

// Caps is what an attached editor offers.
type Caps struct {
	ReadTextFile  bool `json:"read_text_file"`
	WriteTextFile bool `json:"write_text_file"`
}

// Request is one read or write the server asks an editor to perform.
type Request struct {
	ID     string
	Method string // MethodReadTextFile or MethodWriteTextFile
	// Path is the file's absolute path, inside the session's workspace
	// (the tool checked it).
	Path string
	// Content is what a write puts in the file.
	Content string
	// ToolUseID is the tool call that asks.
	ToolUseID string
}

// Errors a request fails with; the tool then uses the disk.
var (
	ErrNoEditor  = errors.New("no editor offering this is attached to the session")
	ErrGone      = errors.New("the editor detached before it answered")
	ErrBusy      = errors.New("the editor has too many requests waiting")
	ErrTimeout   = errors.New("the editor did not answer in time")
	ErrNoRequest = errors.New("no such editor request is waiting (it was answered, timed out or cancelled)")
)

// AnswerError is an editor's refusal of a request, with its message.
type AnswerError struct{ Message string }

func (e *AnswerError) Error() string { return "the editor refused: " + e.Message }

// Broker holds the editors attached to sessions and the requests they
// have not answered yet. Its zero value is not usable: use New.
type Broker struct {
	timeout time.Duration

	mu       sync.Mutex
	sessions map[string][]*Attachment // oldest first
	pending  map[string]*pending      // by request id
}

type answer struct {
	content string
	err     error
}

type pending struct {
	att  *Attachment
	done chan answer // buffered 1
}

// New returns a broker whose requests wait timeout for an answer (0:
// DefaultTimeout).
func New(timeout time.Duration) *Broker {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Broker{timeout: timeout, sessions: map[string][]*Attachment{}, pending: map[string]*pending{}}
}

// Timeout is how long a request waits for its answer.
func (b *Broker) Timeout() time.Duration { return b.timeout }

// Attachment is one client's editor attached to one session, from
// Attach until Detach.
type Attachment struct {
	ID        string
	SessionID string
	Caps      Caps

	b    *Broker
	reqs chan Request
	gone chan struct{}
	once sync.Once
}

// Attach records that the client's editor offers caps to the session's
// tool calls. The newest attachment offering a capability serves it.
func (b *Broker) Attach(sessionID string, caps Caps) *Attachment {
	a := &Attachment{ID: "edt_" + randomID(), SessionID: sessionID, Caps: caps, b: b,
		reqs: make(chan Request, QueueSize), gone: make(chan struct{})}
	b.mu.Lock()
	b.sessions[sessionID] = append(b.sessions[sessionID], a)
	b.mu.Unlock()
	return a
}

// Requests delivers the requests the client must perform and answer
// (Broker.Answer).
func (a *Attachment) Requests() <-chan Request { return a.reqs }

// Done is closed once the attachment is detached.
func (a *Attachment) Done() <-chan struct{} { return a.gone }

// Detach removes the attachment; its requests not answered yet fail
// with ErrGone (their tools use the disk). It is idempotent.
func (a *Attachment) Detach() {
	a.once.Do(func() {
		b := a.b
		b.mu.Lock()
		defer b.mu.Unlock()
		list := b.sessions[a.SessionID]
		for i, x := range list {
			if x == a {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(b.sessions, a.SessionID)
		} else {
			b.sessions[a.SessionID] = list
		}
		for id, p := range b.pending {
			if p.att == a {
				delete(b.pending, id)
				p.done <- answer{err: ErrGone}
			}
		}
		close(a.gone)
	})
}

// Offers reports what the editors attached to the session offer.
func (b *Broker) Offers(sessionID string) Caps {
	b.mu.Lock()
	defer b.mu.Unlock()
	var c Caps
	for _, a := range b.sessions[sessionID] {
		c.ReadTextFile = c.ReadTextFile || a.Caps.ReadTextFile
		c.WriteTextFile = c.WriteTextFile || a.Caps.WriteTextFile
	}
	return c
}

// Attached reports how many editors are attached to the session.
func (b *Broker) Attached(sessionID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions[sessionID])
}

// ReadTextFile asks the session's editor for the text of the file at
// path (its unsaved buffer when it has one).
func (b *Broker) ReadTextFile(ctx context.Context, sessionID, toolUseID, path string) (string, error) {
	return b.ask(ctx, sessionID, Request{Method: MethodReadTextFile, Path: path, ToolUseID: toolUseID})
}

// WriteTextFile asks the session's editor to put content in the file at
// path (its buffer; editors such as Zed save it too).
func (b *Broker) WriteTextFile(ctx context.Context, sessionID, toolUseID, path, content string) error {
	_, err := b.ask(ctx, sessionID, Request{Method: MethodWriteTextFile, Path: path, Content: content, ToolUseID: toolUseID})
	return err
}

// ask hands req to the newest attachment of the session offering its
// method and waits for the answer, the timeout, ctx, or the
// attachment's end.
func (b *Broker) ask(ctx context.Context, sessionID string, req Request) (string, error) {
	req.ID = "edr_" + randomID()
	p := &pending{done: make(chan answer, 1)}
	b.mu.Lock()
	list := b.sessions[sessionID]
	for i := len(list) - 1; i >= 0; i-- {
		if offers(list[i].Caps, req.Method) {
			p.att = list[i]
			break
		}
	}
	if p.att == nil {
		b.mu.Unlock()
		return "", ErrNoEditor
	}
	select {
	case p.att.reqs <- req:
	default:
		b.mu.Unlock()
		return "", ErrBusy
	}
	b.pending[req.ID] = p
	b.mu.Unlock()

	t := time.NewTimer(b.timeout)
	defer t.Stop()
	select {
	case a := <-p.done:
		return a.content, a.err
	case <-t.C:
		b.drop(req.ID)
		return "", fmt.Errorf("%w (%s)", ErrTimeout, b.timeout)
	case <-ctx.Done():
		b.drop(req.ID)
		return "", ctx.Err()
	}
}

// drop forgets a request nobody waits for any more.
func (b *Broker) drop(id string) {
	b.mu.Lock()
	delete(b.pending, id)
	b.mu.Unlock()
}

// Answer delivers the client's answer to a request of the session: the
// file's text for a read (ignored for a write), or errMsg when the
// editor refused. A request that is not waiting (answered, timed out,
// cancelled, of another session) is ErrNoRequest.
func (b *Broker) Answer(sessionID, requestID, content, errMsg string) error {
	b.mu.Lock()
	p, ok := b.pending[requestID]
	if !ok || p.att.SessionID != sessionID {
		b.mu.Unlock()
		return ErrNoRequest
	}
	delete(b.pending, requestID)
	b.mu.Unlock()
	a := answer{content: content}
	if errMsg != "" {
		a = answer{err: &AnswerError{Message: errMsg}}
	}
	p.done <- a
	return nil
}

func offers(c Caps, method string) bool {
	switch method {
	case MethodReadTextFile:
		return c.ReadTextFile
	case MethodWriteTextFile:
		return c.WriteTextFile
	}
	return false
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
