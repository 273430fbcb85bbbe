package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// maxLine bounds one JSON-RPC message from the editor. The SDK's reader
// gives up on the whole connection past 10 MiB, so longer lines are
// answered here and never reach it.
const maxLine = 8 << 20

// JSON-RPC 2.0 error codes the guard answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// lockedWriter serializes whole-message writes to stdout: the SDK writes
// each message with one Write call, and so does the guard.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// rpcError is a JSON-RPC error response the guard writes itself.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// verdict is what the guard decided about one line.
type verdict struct {
	forward bool   // pass the line to the SDK
	reply   []byte // else answer this (nil: drop silently)
}

// checkLine decides whether a line from the editor is a JSON-RPC 2.0
// message the SDK can take. Anything else is answered with a parse error
// (not JSON) or an invalid request (JSON, but not a single JSON-RPC
// message), carrying the request's id when one can be read, so that the
// editor gets an answer and the agent keeps serving. Blank lines are
// dropped. It never panics, whatever the input.
func checkLine(line []byte) verdict {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return verdict{}
	}
	if !json.Valid(line) {
		return verdict{reply: errorReply(nil, codeParseError, "parse error: the line is not valid JSON")}
	}
	if line[0] != '{' {
		if line[0] == '[' {
			return verdict{reply: errorReply(nil, codeInvalidRequest, "invalid request: JSON-RPC batches are not supported")}
		}
		return verdict{reply: errorReply(nil, codeInvalidRequest, "invalid request: a message must be a JSON object")}
	}
	var m struct {
		JSONRPC *string          `json:"jsonrpc"`
		ID      *json.RawMessage `json:"id"`
		Method  *json.RawMessage `json:"method"`
		Result  *json.RawMessage `json:"result"`
		Error   *json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		// Valid JSON whose known members have the wrong types.
		return verdict{reply: errorReply(nil, codeInvalidRequest, "invalid request: "+err.Error())}
	}
	var id json.RawMessage
	if m.ID != nil {
		id = *m.ID
		if !validID(id) {
			return verdict{reply: errorReply(nil, codeInvalidRequest, "invalid request: id must be a string, a number or null")}
		}
	}
	if m.JSONRPC == nil || *m.JSONRPC != "2.0" {
		return verdict{reply: errorReply(id, codeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)}
	}
	if m.Method != nil {
		var method string
		if err := json.Unmarshal(*m.Method, &method); err != nil || method == "" {
			return verdict{reply: errorReply(id, codeInvalidRequest, "invalid request: method must be a non-empty string")}
		}
		return verdict{forward: true}
	}
	if m.ID != nil && (m.Result != nil || m.Error != nil) {
		return verdict{forward: true} // a response to a request of ours
	}
	return verdict{reply: errorReply(id, codeInvalidRequest, "invalid request: neither a request nor a response")}
}

// validID reports whether raw is a JSON-RPC id: a string, a number or
// null.
func validID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch c := raw[0]; {
	case c == '"', c == 'n', c == '-', c >= '0' && c <= '9':
		return true
	}
	return false
}

func errorReply(id json.RawMessage, code int, msg string) []byte {
	r := rpcError{JSONRPC: "2.0", ID: id}
	if len(r.ID) == 0 {
		r.ID = json.RawMessage("null")
	}
	r.Error.Code, r.Error.Message = code, msg
	b, _ := json.Marshal(r)
	return append(b, '\n')
}

// guard copies the editor's input to the SDK line by line, answering the
// lines checkLine refuses on out. It returns when in ends (nil on EOF),
// after closing sdk so the SDK sees the end of input too.
func guard(in io.Reader, sdk *io.PipeWriter, out io.Writer) error {
	defer sdk.Close()
	r := bufio.NewReaderSize(in, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxLine {
				tooLong, line = true, line[:0]
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the rest of a long line
		}
		if err == nil || len(line) > 0 || tooLong {
			if tooLong {
				if _, werr := out.Write(errorReply(nil, codeInvalidRequest, "invalid request: message longer than 8 MiB")); werr != nil {
					return werr
				}
			} else if werr := pass(line, sdk, out); werr != nil {
				return werr
			}
			line, tooLong = line[:0], false
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func pass(line []byte, sdk io.Writer, out io.Writer) error {
	v := checkLine(line)
	switch {
	case v.forward:
		b := bytes.TrimSpace(line)
		// One write per message: the SDK reads lines.
		msg := make([]byte, 0, len(b)+1)
		_, err := sdk.Write(append(append(msg, b...), '\n'))
		return err
	case v.reply != nil:
		_, err := out.Write(v.reply)
		return err
	}
	return nil
}
