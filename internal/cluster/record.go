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
	kindRename        = "rename"
	kindSetArchived   = "set_archived"
	kindQueueTurn     = "queue_turn"
	kindEndQueuedTurn = "end_queued_turn"
	kindPutImages     = "put_images"
	kindLinkImages    = "link_images"
)

// wireImages is a store.PutImages in a record: the images without their
// bytes, which are in the image bucket (images.go); a projection gets
// them before it applies the record.
type wireImages struct {
	SessionID string
	Images    []wireImage
}

type wireImage struct {
	SHA256    string
	MediaType string
	Size      int64
	Width     int
	Height    int
}

// ErrRecord is wrapped by every error decoding a record.
var ErrRecord = errors.New("cluster: bad record")

// EncodeRecord returns the body of ev's log message. ops are the store
// writes of ev's group; an AppendEvent of ev among them is left out (the
// envelope is the event), any other AppendEvent, a SetCursor or an op
// the record format does not know is refused: they belong to one
// node's store, not to the log. A PutImages goes without the images'
// bytes: whoever publishes the record puts them in the image bucket
// (Log.PutImages), and a reader gets them from there.
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
		case store.Rename:
			kind = kindRename
		case store.SetArchived:
			kind = kindSetArchived
		case store.QueueTurn:
			kind = kindQueueTurn
		case store.EndQueuedTurn:
			kind = kindEndQueuedTurn
		case store.PutImages:
			kind = kindPutImages
		case store.LinkImages:
			kind = kindLinkImages
		default:
			return nil, fmt.Errorf("cluster: encode %s: op %T cannot be shipped", ev.ID, op)
		}
		b, err := json.Marshal(wireValue(op))
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
	case kindRename:
		return decodeAs[store.Rename](w.Op)
	case kindSetArchived:
		return decodeAs[store.SetArchived](w.Op)
	case kindQueueTurn:
		return decodeAs[store.QueueTurn](w.Op)
	case kindEndQueuedTurn:
		return decodeAs[store.EndQueuedTurn](w.Op)
	case kindPutImages:
		return decodeImages(w.Op)
	case kindLinkImages:
		return decodeLinks(w.Op)
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

// wireValue is what an op is marshalled as in a record.
func wireValue(op store.Op) any {
	p, ok := op.(store.PutImages)
	if !ok {
		return op
	}
	w := wireImages{SessionID: p.SessionID, Images: make([]wireImage, len(p.Images))}
	for i, im := range p.Images {
		w.Images[i] = wireImage{SHA256: im.SHA256, MediaType: im.MediaType, Size: im.Size, Width: im.Width, Height: im.Height}
	}
	return w
}

// decodeImages decodes a put_images op: a session and at most
// maxRecordOps images, each named by a valid SHA-256, with a size in
// (0, maxImageSize]; their bytes are left for the reader to get.
func decodeImages(b json.RawMessage) (store.Op, error) {
	var w wireImages
	if err := decodeStrict(b, &w); err != nil {
		return nil, err
	}
	if w.SessionID == "" || len(w.Images) == 0 || len(w.Images) > maxRecordOps {
		return nil, fmt.Errorf("put_images: a session and 1 to %d images", maxRecordOps)
	}
	p := store.PutImages{SessionID: w.SessionID, Images: make([]store.Image, len(w.Images))}
	for i, im := range w.Images {
		if !validSHA256(im.SHA256) || im.Size <= 0 || im.Size > maxImageSize {
			return nil, fmt.Errorf("put_images: image %d: bad name %q or size %d", i, im.SHA256, im.Size)
		}
		p.Images[i] = store.Image{SHA256: im.SHA256, MediaType: im.MediaType, Size: im.Size, Width: im.Width, Height: im.Height}
	}
	return p, nil
}

// decodeLinks decodes a link_images op: a session and at most
// maxRecordOps valid SHA-256 names.
func decodeLinks(b json.RawMessage) (store.Op, error) {
	var l store.LinkImages
	if err := decodeStrict(b, &l); err != nil {
		return nil, err
	}
	if l.SessionID == "" || len(l.SHA256s) == 0 || len(l.SHA256s) > maxRecordOps {
		return nil, fmt.Errorf("link_images: a session and 1 to %d images", maxRecordOps)
	}
	for i, sha := range l.SHA256s {
		if !validSHA256(sha) {
			return nil, fmt.Errorf("link_images: image %d: bad name %q", i, sha)
		}
	}
	return l, nil
}

// decodeStrict decodes a non-empty JSON value into v, refusing fields v
// does not have.
func decodeStrict(b json.RawMessage, v any) error {
	if len(b) == 0 {
		return errors.New("empty op")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the op")
	}
	return nil
}
