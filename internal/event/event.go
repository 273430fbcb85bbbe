package event

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Actor names who produced an event. The set is open; these are the ones
// the core emits.
const (
	ActorUser    = "user"    // the person, through a client
	ActorAgent   = "agent"   // the agent loop
	ActorModel   = "model"   // a model adapter (streaming events)
	ActorTool    = "tool"    // the tool dispatcher
	ActorRouter  = "router"  // the routing engine
	ActorSession = "session" // the session manager
	ActorBus     = "bus"     // the bus itself (meta-events)
	ActorCost    = "cost"    // the cost accumulator
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
	b, err := e.encode()
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
	b, err := e.encode()
	if err != nil {
		// Unsealed events with broken payloads are a programming error;
		// encode them with an empty payload rather than panicking.
		c := *e
		c.Payload = nil
		b, _ = c.encode()
	}
	return b
}

// MarshalJSON implements json.Marshaler with the envelope of contract §4.
func (e *Event) MarshalJSON() ([]byte, error) {
	if e.raw != nil {
		return e.raw, nil
	}
	return e.encode()
}

func (e *Event) encode() ([]byte, error) {
	w := wireEvent{
		ID:        e.ID,
		Type:      e.Type,
		SessionID: e.SessionID,
		TS:        e.TS.UTC().Format(TSFormat),
		Actor:     e.Actor,
		Payload:   e.Payload,
	}
	if e.TurnID != "" {
		t := e.TurnID
		w.TurnID = &t
	}
	if len(w.Payload) == 0 {
		w.Payload = json.RawMessage("{}")
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encode event %s (%s): %w", e.ID, e.Type, err)
	}
	return b, nil
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

// MustPayload marshals v into a payload. It panics only on values that
// cannot be marshalled (channels, funcs), which is a programming error.
func MustPayload(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("event payload: %v", err))
	}
	return b
}
