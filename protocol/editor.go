package protocol

// The editor attachment (docs/editors.md): a client declares what its
// editor offers with POST /sessions/{id}/editor, whose answer is a
// stream of EditorFrame lines (application/x-ndjson) while the client
// keeps it open; it performs each request and answers it with POST
// /sessions/{id}/editor/requests/{request_id}.

// EditorCaps is the body of POST /sessions/{id}/editor: what the
// client's editor offers the session's file tools.
type EditorCaps struct {
	// ReadTextFile: read_file and edit_file read the editor's text of a
	// file (its unsaved buffer).
	ReadTextFile bool `json:"read_text_file"`
	// WriteTextFile: write_file and edit_file write through the editor.
	WriteTextFile bool `json:"write_text_file"`
}

// Editor frame types.
const (
	EditorFrameAttached = "attached"
	EditorFrameRequest  = "request"
	EditorFramePing     = "ping"
)

// Editor request methods (as ACP names them).
const (
	EditorReadTextFile  = "fs/read_text_file"
	EditorWriteTextFile = "fs/write_text_file"
)

// EditorFrame is one line of the attachment's stream: "attached" first
// (the attachment's id and how long the server waits for an answer),
// then a "request" per read or write, and a "ping" every 15 seconds.
type EditorFrame struct {
	Type         string `json:"type"`
	AttachmentID string `json:"attachment_id,omitempty"`
	TimeoutMS    int64  `json:"timeout_ms,omitempty"`
	// A request: its id, method, the file's absolute path, the content
	// of a write, and the tool call that asks.
	ID        string  `json:"id,omitempty"`
	Method    string  `json:"method,omitempty"`
	Path      string  `json:"path,omitempty"`
	Content   *string `json:"content,omitempty"`
	ToolUseID string  `json:"tool_use_id,omitempty"`
}

// EditorAnswer is the body of POST
// /sessions/{id}/editor/requests/{request_id}: a read's text, or the
// editor's error (the tool then uses the disk). A write's answer is {}
// on success.
type EditorAnswer struct {
	Content string `json:"content,omitempty"`
	Error   string `json:"error,omitempty"`
}
