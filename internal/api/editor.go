package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/metis-agent/metis/internal/editor"
	"github.com/metis-agent/metis/protocol"
)

// The editor attachment (docs/editors.md, docs/protocol.md): POST
// /sessions/{id}/editor holds a client's editor attached to the session
// while its answer, a stream of protocol.EditorFrame lines, stays open;
// POST /sessions/{id}/editor/requests/{request_id} answers a request.

// editorPing is how often the attachment's stream says it is alive.
const editorPing = 15 * time.Second

// editorAnswerBytes bounds an answer's body: a read's text is at most
// tool.MaxEditBytes (8 MiB), JSON-escaped.
const editorAnswerBytes = 20 << 20

// MountEditor serves the editor attachments of b.
func (a *API) MountEditor(b *editor.Broker) {
	a.route("/sessions/{id}/editor", map[string]http.HandlerFunc{"POST": func(w http.ResponseWriter, r *http.Request) {
		a.attachEditor(b, w, r)
	}})
	a.route("/sessions/{id}/editor/requests/{request_id}", map[string]http.HandlerFunc{"POST": func(w http.ResponseWriter, r *http.Request) {
		a.answerEditor(b, w, r)
	}})
}

func (a *API) attachEditor(b *editor.Broker, w http.ResponseWriter, r *http.Request) {
	var caps protocol.EditorCaps
	if !decode(w, r, &caps, false) {
		return
	}
	s, err := a.sessions.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	if !caps.ReadTextFile && !caps.WriteTextFile {
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "the editor offers nothing: set read_text_file or write_text_file")
		return
	}
	att := b.Attach(s.ID, editor.Caps{ReadTextFile: caps.ReadTextFile, WriteTextFile: caps.WriteTextFile})
	defer att.Detach()
	a.log.Info("editor attached", "session", s.ID, "attachment", att.ID, "read", caps.ReadTextFile, "write", caps.WriteTextFile)
	defer a.log.Info("editor detached", "session", s.ID, "attachment", att.ID)

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	send := func(f protocol.EditorFrame) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		return enc.Encode(f) == nil && rc.Flush() == nil
	}
	if !send(protocol.EditorFrame{Type: protocol.EditorFrameAttached, AttachmentID: att.ID, TimeoutMS: b.Timeout().Milliseconds()}) {
		return
	}
	ping := time.NewTicker(editorPing)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			if !send(protocol.EditorFrame{Type: protocol.EditorFramePing}) {
				return
			}
		case q := <-att.Requests():
			f := protocol.EditorFrame{Type: protocol.EditorFrameRequest, ID: q.ID, Method: q.Method, Path: q.Path, ToolUseID: q.ToolUseID}
			if q.Method == editor.MethodWriteTextFile {
				f.Content = &q.Content
			}
			if !send(f) {
				return
			}
		}
	}
}

func (a *API) answerEditor(b *editor.Broker, w http.ResponseWriter, r *http.Request) {
	var ans protocol.EditorAnswer
	if !decodeLimit(w, r, &ans, false, editorAnswerBytes) {
		return
	}
	err := b.Answer(r.PathValue("id"), r.PathValue("request_id"), ans.Content, ans.Error)
	if errors.Is(err, editor.ErrNoRequest) {
		WriteError(w, http.StatusNotFound, CodeNotFound, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
