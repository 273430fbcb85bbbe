package sse

import (
	"bytes"

	gosse "github.com/tmaxmax/go-sse"

	"github.com/metis-agent/metis/internal/hub"
)

// An event's SSE record is its "id: <event id>" line, its frame on one
// "data: " line, and the blank line that ends it: what go-sse writes
// for a message with that id and data. The part of it that is the
// event's own (the id line and the data field's name) is built once per
// event and kept in the hub's item, shared by every SSE client; each
// client writes it, the frame (shared already), and the blank line.
// Sharing the head rather than a whole record keeps what an item holds
// for SSE to a few dozen bytes: a record would hold the frame twice
// for as long as the item stays in the ring.

var (
	fieldID   = []byte("id: ")
	fieldData = []byte("data: ")
	endLine   = []byte("\n")
	endRecord = []byte("\n\n")
)

// recordHead is the encoding SSE clients share: the head of an event's
// record, or nil for an event whose record is not that simple (a frame
// spanning lines or empty, an id go-sse refuses), which is then framed
// by go-sse for each client. Frames are JSON from encoding/json, which
// escapes line breaks, so nil does not happen in practice.
var recordHead = hub.NewEncoding(func(it *hub.Item) []byte {
	if !simpleRecord(it.ID, it.Frame) {
		return nil
	}
	b := make([]byte, 0, len(fieldID)+len(it.ID)+len(endLine)+len(fieldData))
	b = append(b, fieldID...)
	b = append(b, it.ID...)
	b = append(b, endLine...)
	return append(b, fieldData...)
})

// simpleRecord reports whether go-sse frames an event with this id and
// frame as one id line and one data line: a non-empty id and frame, on
// one line each.
func simpleRecord(id string, frame []byte) bool {
	if id == "" || len(frame) == 0 || bytes.ContainsAny(frame, "\r\n") {
		return false
	}
	_, err := gosse.NewID(id)
	return err == nil
}

// message is a frame as go-sse frames it: its JSON in data: and its
// cursor, if any, in id:.
func message(cursor string, frame []byte) *gosse.Message {
	var m gosse.Message
	if cursor != "" {
		// Cursors are event ids (no newline or NUL); one that is not
		// valid as an SSE id goes without.
		if id, err := gosse.NewID(cursor); err == nil {
			m.ID = id
		}
	}
	m.AppendData(string(frame))
	return &m
}
