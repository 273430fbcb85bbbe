package acp

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// The editor's files (docs/editors.md): when the editor offers
// fs/read_text_file and fs/write_text_file (initialize's
// clientCapabilities.fs) and --editor-fs allows it, the agent attaches
// the editor to each session it serves (POST /sessions/{id}/editor,
// held open and re-made after a drop), so that the session's file tools
// read the editor's buffers and write through it. The server checks
// every path first and uses the disk whenever the editor does not
// answer.

// editorFiles holds the agent's editor attachments.
type editorFiles struct {
	caps protocol.EditorCaps // what the editor offers; zero: nothing

	mu       sync.Mutex
	attached map[string]context.CancelFunc // session id → stop
	wg       sync.WaitGroup
}

// editorAttachWait bounds how long session/new, load and resume wait
// for the attachment before answering (the turn that follows then finds
// it); past it the attachment goes on being made in the background.
const editorAttachWait = 5 * time.Second

// editorCallTimeout bounds one request to the editor (the server gives
// up sooner and uses the disk).
const editorCallTimeout = time.Minute

// offerFiles records what the editor offers, when files through the
// editor are allowed (--editor-fs).
func (a *Agent) offerFiles(fs sdk.FileSystemCapabilities) {
	if !a.editorFS {
		return
	}
	a.files.mu.Lock()
	a.files.caps = protocol.EditorCaps{ReadTextFile: fs.ReadTextFile, WriteTextFile: fs.WriteTextFile}
	a.files.mu.Unlock()
}

// attachEditor attaches the editor to the session, once, and waits a
// little for the server to hold it.
func (a *Agent) attachEditor(sid string) {
	f := &a.files
	f.mu.Lock()
	caps := f.caps
	if (!caps.ReadTextFile && !caps.WriteTextFile) || f.attached[sid] != nil || a.ctx.Err() != nil {
		f.mu.Unlock()
		return
	}
	if f.attached == nil {
		f.attached = map[string]context.CancelFunc{}
	}
	ctx, cancel := context.WithCancel(a.ctx)
	f.attached[sid] = cancel
	f.wg.Add(1)
	f.mu.Unlock()
	ready := make(chan struct{})
	go func() {
		defer f.wg.Done()
		a.keepEditor(ctx, sid, caps, ready)
	}()
	select {
	case <-ready:
	case <-ctx.Done():
	case <-time.After(editorAttachWait):
		a.log.Warn("the editor's attachment is slow to be made; file tools use the disk meanwhile", "session", sid)
	}
}

// detachEditor ends the session's attachment (session/close).
func (a *Agent) detachEditor(sid string) {
	a.files.mu.Lock()
	cancel := a.files.attached[sid]
	delete(a.files.attached, sid)
	a.files.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// waitEditors returns once every attachment has ended (after the
// agent's context is done).
func (a *Agent) waitEditors() { a.files.wg.Wait() }

// keepEditor holds the attachment until ctx ends, making it again after
// a drop (a server restart) with a backoff. ready is closed once the
// server first holds it.
func (a *Agent) keepEditor(ctx context.Context, sid string, caps protocol.EditorCaps, ready chan struct{}) {
	var once sync.Once
	backoff := 250 * time.Millisecond
	for {
		err := a.c.AttachEditor(ctx, sid, caps, a.serveEditor(sid), func() {
			once.Do(func() { close(ready) })
			backoff = 250 * time.Millisecond
			a.log.Debug("editor attached", "session", sid)
		})
		if ctx.Err() != nil {
			return
		}
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status != http.StatusServiceUnavailable && ae.Status < 500 {
			// The session is gone, or the server does not serve
			// attachments (an older one): the disk it is.
			a.log.Warn("the editor could not be attached; file tools use the disk", "session", sid, "err", err)
			once.Do(func() { close(ready) })
			return
		}
		a.log.Debug("editor attachment dropped; making it again", "session", sid, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// serveEditor performs the server's requests through the editor.
func (a *Agent) serveEditor(sid string) client.EditorHandler {
	return func(ctx context.Context, f protocol.EditorFrame) protocol.EditorAnswer {
		ctx, cancel := context.WithTimeout(ctx, editorCallTimeout)
		defer cancel()
		switch f.Method {
		case protocol.EditorReadTextFile:
			resp, err := a.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: sdk.SessionId(sid), Path: f.Path})
			if err != nil {
				return protocol.EditorAnswer{Error: editorError(err)}
			}
			return protocol.EditorAnswer{Content: resp.Content}
		case protocol.EditorWriteTextFile:
			if f.Content == nil {
				return protocol.EditorAnswer{Error: "a write without content"}
			}
			if _, err := a.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: sdk.SessionId(sid), Path: f.Path, Content: *f.Content}); err != nil {
				return protocol.EditorAnswer{Error: editorError(err)}
			}
			return protocol.EditorAnswer{}
		}
		return protocol.EditorAnswer{Error: "unknown method " + f.Method}
	}
}

// editorError is an editor's error as the server is told it.
func editorError(err error) string {
	var re *sdk.RequestError
	if errors.As(err, &re) {
		return re.Message
	}
	return err.Error()
}
