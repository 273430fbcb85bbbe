package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/metis-agent/metis/protocol"
)

// EditorHandler performs one request of the server (a read or a write
// of a file through the editor) and returns its answer.
type EditorHandler func(ctx context.Context, req protocol.EditorFrame) protocol.EditorAnswer

// AttachEditor attaches the client's editor to the session (POST
// /sessions/{id}/editor, docs/editors.md): while it runs, the session's
// file tools ask handle to read and write files through the editor, and
// each answer is posted back. attached, if set, is called once the
// server holds the attachment. It returns when ctx ends (nil) or the
// stream ends (an error); the handlers it started have returned by then.
func (c *Client) AttachEditor(ctx context.Context, sessionID string, caps protocol.EditorCaps, handle EditorHandler, attached func()) error {
	body, err := json.Marshal(caps)
	if err != nil {
		return err
	}
	path := "/sessions/" + url.PathEscape(sessionID) + "/editor"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c.authorize(req.Header)
	hc := *c.HTTP
	hc.Timeout = 0 // the answer is a stream held open
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("metis: POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return apiErrorOf(resp.StatusCode, raw)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 32<<20)
	for sc.Scan() {
		var f protocol.EditorFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return fmt.Errorf("metis: editor stream: %w", err)
		}
		switch f.Type {
		case protocol.EditorFrameAttached:
			if attached != nil {
				attached()
			}
		case protocol.EditorFrameRequest:
			wg.Add(1)
			go func() {
				defer wg.Done()
				ans := handle(ctx, f)
				rpath := path + "/requests/" + url.PathEscape(f.ID)
				if err := c.do(ctx, http.MethodPost, rpath, ans, nil); err != nil && ctx.Err() == nil {
					if c.Logger != nil {
						c.Logger.Debug("editor answer", "request", f.ID, "err", err)
					}
				}
			}()
		}
	}
	if ctx.Err() != nil || errors.Is(sc.Err(), context.Canceled) {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("metis: editor stream: %w", err)
	}
	return errors.New("metis: editor stream: the server closed it")
}
