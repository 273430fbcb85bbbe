package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/event"
)

// Limits on client frames. The WebSocket read limit (MaxClientFrame)
// bounds the whole frame; the field limits keep what the server stores
// and echoes small.
const (
	MaxClientFrame = 1 << 20
	MaxNonce       = 128
	MaxReason      = 200
	MaxTurnID      = 128
	MaxCursor      = 64
	MaxFilterItems = 256
)

// ClientFrame is a decoded client frame: exactly one of the pointers is
// set, matching Type.
type ClientFrame struct {
	Type      string
	Subscribe *Subscribe
	Cancel    *Cancel
	Ping      *Heartbeat
	Pong      *Heartbeat
}

// Subscribe is the subscribe frame after decoding. Preset is set when the
// client named a preset instead of a filter object.
type Subscribe struct {
	Filter Filter
	// Preset, when set, replaces Filter's types and actors; its
	// IncludeWorkerSessions still applies.
	Preset   string
	Since    *string
	Snapshot bool
}

// Cancel is the cancel frame.
type Cancel struct {
	TurnID string `json:"turn_id"`
	Reason string `json:"reason"`
}

// DecodeError is a refused client frame; Code is an error frame code.
type DecodeError struct {
	Code    string
	Message string
}

func (e *DecodeError) Error() string { return e.Code + ": " + e.Message }

func bad(code, format string, args ...any) *DecodeError {
	return &DecodeError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// DecodeClientFrame decodes one client frame strictly: valid UTF-8 JSON
// object, a known type, the fields of that type with their limits, and
// nothing after the object. Unknown fields are ignored (forward
// compatibility). It never panics; every refusal is a *DecodeError.
func DecodeClientFrame(b []byte) (ClientFrame, error) {
	if len(b) > MaxClientFrame {
		return ClientFrame{}, bad(CodeInvalidFrame, "frame is %d bytes; the limit is %d", len(b), MaxClientFrame)
	}
	if !utf8.Valid(b) {
		return ClientFrame{}, bad(CodeInvalidJSON, "frame is not valid UTF-8")
	}
	if t := bytes.TrimLeft(b, jsonSpace); len(t) == 0 || t[0] != '{' {
		return ClientFrame{}, bad(CodeInvalidJSON, "frame is not a JSON object")
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := strictUnmarshal(b, &head); err != nil {
		return ClientFrame{}, bad(CodeInvalidJSON, "frame is not a JSON object: %v", err)
	}
	f := ClientFrame{Type: head.Type}
	switch head.Type {
	case TypeSubscribe:
		s, err := decodeSubscribe(b)
		if err != nil {
			return ClientFrame{}, err
		}
		f.Subscribe = s
	case TypeCancel:
		var c Cancel
		if err := strictUnmarshal(b, &c); err != nil {
			return ClientFrame{}, bad(CodeInvalidFrame, "cancel: %v", err)
		}
		if c.TurnID == "" || len(c.TurnID) > MaxTurnID {
			return ClientFrame{}, bad(CodeInvalidFrame, "cancel: turn_id must be 1 to %d bytes", MaxTurnID)
		}
		if len(c.Reason) > MaxReason {
			return ClientFrame{}, bad(CodeInvalidFrame, "cancel: reason is longer than %d bytes", MaxReason)
		}
		f.Cancel = &c
	case TypePing, TypePong:
		var h Heartbeat
		if err := strictUnmarshal(b, &h); err != nil {
			return ClientFrame{}, bad(CodeInvalidFrame, "%s: %v", head.Type, err)
		}
		if len(h.Nonce) > MaxNonce {
			return ClientFrame{}, bad(CodeInvalidFrame, "%s: nonce is longer than %d bytes", head.Type, MaxNonce)
		}
		if head.Type == TypePing {
			f.Ping = &h
		} else {
			f.Pong = &h
		}
	case "":
		return ClientFrame{}, bad(CodeInvalidFrame, `frame has no "type"`)
	default:
		t := head.Type
		if len(t) > 64 {
			t = t[:64] + "…"
		}
		return ClientFrame{}, bad(CodeUnknownFrameType, "unknown frame type %q", t)
	}
	return f, nil
}

func decodeSubscribe(b []byte) (*Subscribe, error) {
	var raw struct {
		Filter   json.RawMessage `json:"filter"`
		Since    *string         `json:"since"`
		Snapshot bool            `json:"snapshot"`
	}
	if err := strictUnmarshal(b, &raw); err != nil {
		return nil, bad(CodeInvalidFrame, "subscribe: %v", err)
	}
	s := &Subscribe{Since: raw.Since, Snapshot: raw.Snapshot}
	if s.Since != nil && (len(*s.Since) == 0 || len(*s.Since) > MaxCursor) {
		return nil, bad(CodeInvalidFrame, "subscribe: since must be an event id or null")
	}
	filter := bytes.TrimSpace(raw.Filter)
	switch {
	case len(filter) == 0 || bytes.Equal(filter, []byte("null")):
		s.Preset = event.PresetFull
	case filter[0] == '"':
		if err := json.Unmarshal(filter, &s.Preset); err != nil {
			return nil, bad(CodeInvalidFrame, "subscribe: filter: %v", err)
		}
		if s.Preset == "" {
			// Not "no filter": Resolve would read it as every type.
			return nil, bad(CodeInvalidFrame, "subscribe: filter: empty preset name")
		}
	case filter[0] == '{':
		if err := strictUnmarshal(filter, &s.Filter); err != nil {
			return nil, bad(CodeInvalidFrame, "subscribe: filter: %v", err)
		}
		if len(s.Filter.EventTypes) > MaxFilterItems || len(s.Filter.Actors) > MaxFilterItems {
			return nil, bad(CodeInvalidFrame, "subscribe: filter lists more than %d items", MaxFilterItems)
		}
	default:
		return nil, bad(CodeInvalidFrame, "subscribe: filter must be an object or a preset name")
	}
	return s, nil
}

// jsonSpace is JSON's insignificant whitespace (RFC 8259 §2).
const jsonSpace = " \t\n\r"

// strictUnmarshal decodes one JSON value and refuses trailing data.
// (Decoder.More is not enough: it reports no more data before a stray
// '}' or ']'.)
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if len(bytes.TrimLeft(b[dec.InputOffset():], jsonSpace)) > 0 {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

// FilterError is an invalid filter; Offending is the entry at fault.
type FilterError struct {
	Offending string
	Message   string
}

func (e *FilterError) Error() string { return e.Message }

// Resolve turns a subscribe's filter or preset into a filter with an
// explicit type list, checked strictly against the catalog (spec §9.3):
// every entry must be a catalog or streaming-only type; an unknown preset
// or type, or an empty type list, is refused. A preset keeps
// Filter.IncludeWorkerSessions (the SSE query can ask for both).
func (s *Subscribe) Resolve() (Filter, error) {
	if s.Preset != "" {
		types, ok := event.Preset(s.Preset)
		if !ok {
			return Filter{}, &FilterError{Offending: truncate(s.Preset, 128),
				Message: fmt.Sprintf("unknown preset %q (known: preset:chat, preset:full)", truncate(s.Preset, 64))}
		}
		return Filter{EventTypes: typeNames(types), IncludeWorkerSessions: s.Filter.IncludeWorkerSessions}, nil
	}
	f := s.Filter
	if f.EventTypes == nil {
		all, _ := event.Preset(event.PresetFull)
		f.EventTypes = typeNames(all)
	} else if len(f.EventTypes) == 0 {
		return Filter{}, &FilterError{Message: "event_types is empty: the subscription would receive nothing"}
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(f.EventTypes))
	for _, t := range f.EventTypes {
		if !event.Known(event.Type(t)) {
			return Filter{}, &FilterError{Offending: truncate(t, 128), Message: fmt.Sprintf("unknown event type %q", truncate(t, 64))}
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	f.EventTypes = out
	if f.Actors != nil && len(f.Actors) == 0 {
		return Filter{}, &FilterError{Message: "actors is empty: the subscription would receive nothing (null means every actor)"}
	}
	for _, a := range f.Actors {
		if a == "" || len(a) > 64 || strings.ContainsAny(a, "\x00") {
			return Filter{}, &FilterError{Offending: truncate(a, 64), Message: "actors must be non-empty names of at most 64 bytes"}
		}
	}
	return f, nil
}

func typeNames(ts []event.Type) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
