package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// A record is the body of one log message: the event's exact envelope
// bytes, then, for a catalog event committed with store writes, a
// newline and a JSON array of those writes (the ops of its group other
// than the AppendEvent itself). An envelope is compact JSON and never
// holds a raw newline, so the first newline splits the two parts.
//
// Shipping the ops rather than deriving rows from events keeps one
// source of truth for what a group writes: a projection applies exactly
// what the owner's group held, and nothing about the agent loop has to
// be re-implemented to rebuild messages, turns and tool calls.

// maxRecordOps bounds the ops a record may carry; an emitter's group
// holds a handful.
const maxRecordOps = 1024

// wireOp is one op in a record: its kind and its fields.
type wireOp struct {
	Kind string          `json:"kind"`
	Op   json.RawMessage `json:"op"`
}

// Op kinds in a record.
const (
	kindCreateSession = "create_session"
	kindUpdateSession = "update_session"
	kindAddUsage      = "add_usage"
	kindPutMessage    = "put_message"
	kindPutTurn       = "put_turn"
	kindSetTitle      = "set_title"
	kindPutToolCall   = "put_tool_call"
)

// ErrRecord is wrapped by every error decoding a record.
var ErrRecord = errors.New("cluster: bad record")

// EncodeRecord returns the body of ev's log message. ops are the store
// writes of ev's group; an AppendEvent of ev among them is left out (the
// envelope is the event), any other AppendEvent, a SetCursor or an op
// the record format does not know is refused: they belong to one
// node's store, not to the log.
func EncodeRecord(ev *event.Event, ops []store.Op) ([]byte, error) {
	env := ev.JSON()
	if bytes.IndexByte(env, '\n') >= 0 {
		return nil, fmt.Errorf("cluster: encode %s: envelope holds a newline", ev.ID)
	}
	var wire []wireOp
	for _, op := range ops {
		kind := ""
		switch o := op.(type) {
		case store.AppendEvent:
			if o.Event == nil || o.Event.ID != ev.ID {
				return nil, fmt.Errorf("cluster: encode %s: the group appends another event", ev.ID)
			}
			continue
		case store.CreateSession:
			kind = kindCreateSession
		case store.UpdateSession:
			kind = kindUpdateSession
		case store.AddUsage:
			kind = kindAddUsage
		case store.PutMessage:
			kind = kindPutMessage
		case store.PutTurn:
			kind = kindPutTurn
		case store.SetTitle:
			kind = kindSetTitle
		case store.PutToolCall:
			kind = kindPutToolCall
		default:
			return nil, fmt.Errorf("cluster: encode %s: op %T cannot be shipped", ev.ID, op)
		}
		b, err := json.Marshal(op)
		if err != nil {
			return nil, fmt.Errorf("cluster: encode %s: %s: %w", ev.ID, kind, err)
		}
		wire = append(wire, wireOp{Kind: kind, Op: b})
	}
	if len(wire) == 0 {
		return env, nil
	}
	tail, err := json.Marshal(wire)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode %s: ops: %w", ev.ID, err)
	}
	body := make([]byte, 0, len(env)+1+len(tail))
	body = append(append(append(body, env...), '\n'), tail...)
	return body, nil
}

// DecodeRecord splits a log message body into its event (sealed with
// the envelope's own bytes) and the store ops committed with it (without
// the AppendEvent). Bodies come from the network: every malformed one is
// an error wrapping ErrRecord, never a panic.
func DecodeRecord(body []byte) (*event.Event, []store.Op, error) {
	env, tail, hasOps := bytes.Cut(body, []byte{'\n'})
	ev, err := event.Decode(env)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrRecord, err)
	}
	if ev.ID == "" || ev.SessionID == "" || !event.Known(ev.Type) {
		return nil, nil, fmt.Errorf("%w: envelope lacks an id, a session or a known type", ErrRecord)
	}
	if !hasOps {
		return ev, nil, nil
	}
	if event.FamilyOf(ev.Type) != event.Catalog {
		return nil, nil, fmt.Errorf("%w: streaming event %s carries ops", ErrRecord, ev.ID)
	}
	var wire []wireOp
	if err := json.Unmarshal(tail, &wire); err != nil {
		return nil, nil, fmt.Errorf("%w: ops of %s: %w", ErrRecord, ev.ID, err)
	}
	if len(wire) > maxRecordOps {
		return nil, nil, fmt.Errorf("%w: %s carries %d ops", ErrRecord, ev.ID, len(wire))
	}
	ops := make([]store.Op, 0, len(wire))
	for i, w := range wire {
		op, err := decodeOp(w)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: op %d of %s: %w", ErrRecord, i, ev.ID, err)
		}
		ops = append(ops, op)
	}
	return ev, ops, nil
}

func decodeOp(w wireOp) (store.Op, error) {
	switch w.Kind {
	case kindCreateSession:
		return decodeAs[store.CreateSession](w.Op)
	case kindUpdateSession:
		return decodeAs[store.UpdateSession](w.Op)
	case kindAddUsage:
		return decodeAs[store.AddUsage](w.Op)
	case kindPutMessage:
		return decodeAs[store.PutMessage](w.Op)
	case kindPutTurn:
		return decodeAs[store.PutTurn](w.Op)
	case kindSetTitle:
		return decodeAs[store.SetTitle](w.Op)
	case kindPutToolCall:
		return decodeAs[store.PutToolCall](w.Op)
	}
	return nil, fmt.Errorf("unknown op kind %q", w.Kind)
}

func decodeAs[T store.Op](b json.RawMessage) (store.Op, error) {
	var v T
	if len(b) == 0 {
		return nil, errors.New("empty op")
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}
