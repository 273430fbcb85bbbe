package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Event is one domain event of either family. It is immutable once
// emitted: the bus encodes it exactly once and every consumer (trace
// store, subscribers, every client connection) shares the same bytes.
type Event struct {
	ID        string          // "evt_" + ULID; strictly increasing per session
	Type      Type            // catalog or streaming type
	SessionID string          // owning session
	TurnID    string          // "" outside a turn (encoded as null)
	TS        time.Time       // emission time
	Actor     string          // who emitted it
	Payload   json.RawMessage // type-specific object; nil encodes as {}

	// Seq is the trace store's global append sequence, set by the store
	// when a catalog event is committed (0 for streaming events). It is
	// not part of the envelope.
	Seq int64

	raw []byte // cached envelope encoding, set by Seal
}

// wireEvent is the envelope as it appears on the wire and in the store.
type wireEvent struct {
	ID        string          `json:"id"`
	Type      Type            `json:"type"`
	SessionID string          `json:"session_id"`
	TurnID    *string         `json:"turn_id"`
	TS        string          `json:"ts"`
	Actor     string          `json:"actor"`
	Payload   json.RawMessage `json:"payload"`
}

// TSFormat is the timestamp layout of the envelope: RFC 3339 with
// nanoseconds, always in UTC.
const TSFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Seal encodes the event once and caches the bytes. It is called by the
// emitter before the event is handed to anyone; calling it again is a
// no-op. Seal fails only if the payload is not valid JSON.
func (e *Event) Seal() error {
	if e.raw != nil {
		return nil
	}
	b, err := e.encode(false)
	if err != nil {
		return err
	}
	e.raw = b
	return nil
}

// JSON returns the envelope encoding. It encodes on every call for an
// unsealed event; sealed events return the shared cached bytes, which
// callers must not modify.
func (e *Event) JSON() []byte {
	if e.raw != nil {
		return e.raw
	}
	b, err := e.encode(false)
	if err != nil {
		// Unsealed events with broken payloads are a programming error;
		// encode them with an empty payload rather than panicking.
		c := *e
		c.Payload = nil
		b, _ = c.encode(false)
	}
	return b
}

// MarshalJSON implements json.Marshaler with the envelope of contract §4.
func (e *Event) MarshalJSON() ([]byte, error) {
	if e.raw != nil {
		return e.raw, nil
	}
	return e.encode(false)
}

// SealMarshalled seals an event whose payload was produced by
// encoding/json (so it is valid, compact JSON): the payload is copied into
// the envelope without being scanned again. The bus uses it for the
// payloads it marshals itself, deltas included.
func (e *Event) SealMarshalled() {
	if e.raw == nil {
		e.raw, _ = e.encode(true) // cannot fail: no payload check
	}
}

// encode writes the envelope by hand: the payload, already JSON, goes
// straight into the envelope instead of through a second reflective
// marshal (this runs once per event, deltas included). Unless trusted,
// the payload is validated and compacted on the way.
func (e *Event) encode(trusted bool) ([]byte, error) {
	payload := e.Payload
	if len(payload) == 0 {
		payload = emptyObject
	}
	b := make([]byte, 0, 112+len(e.ID)+len(e.Type)+len(e.SessionID)+len(e.TurnID)+len(e.Actor)+len(payload))
	b = append(b, `{"id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, string(e.Type))
	b = append(b, `,"session_id":`...)
	b = appendString(b, e.SessionID)
	b = append(b, `,"turn_id":`...)
	if e.TurnID == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, e.TurnID)
	}
	b = append(b, `,"ts":"`...)
	b = e.TS.UTC().AppendFormat(b, TSFormat)
	b = append(b, `","actor":`...)
	b = appendString(b, e.Actor)
	b = append(b, `,"payload":`...)
	if trusted {
		return append(append(b, payload...), '}'), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, payload); err != nil {
		return nil, fmt.Errorf("encode event %s (%s): payload: %w", e.ID, e.Type, err)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

var emptyObject = json.RawMessage("{}")

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it (invalid UTF-8 becomes U+FFFD).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&':
				b = append(b, c)
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// UnmarshalJSON decodes an envelope. It keeps the input bytes as the
// cached encoding only if they are already canonical; otherwise the
// event re-encodes on demand.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w wireEvent
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("decode event: %w", err)
	}
	ts, err := time.Parse(time.RFC3339Nano, w.TS)
	if err != nil && w.TS != "" {
		return fmt.Errorf("decode event %s: ts: %w", w.ID, err)
	}
	*e = Event{ID: w.ID, Type: w.Type, SessionID: w.SessionID, TS: ts, Actor: w.Actor, Payload: w.Payload}
	if w.TurnID != nil {
		e.TurnID = *w.TurnID
	}
	return nil
}

// Decode decodes a stored or received envelope and seals it with the
// given bytes, so re-sending it costs no encoding.
func Decode(b []byte) (*Event, error) {
	e := new(Event)
	if err := e.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	e.raw = b
	return e, nil
}

// DecodePayload decodes the payload into v.
func (e *Event) DecodePayload(v any) error {
	if len(e.Payload) == 0 {
		return nil
	}
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return fmt.Errorf("decode %s payload: %w", e.Type, err)
	}
	return nil
}

// String is a short human-readable form for logs.
func (e *Event) String() string {
	return e.ID + " " + string(e.Type) + " " + e.SessionID + " " + strconv.Quote(e.TurnID)
}
