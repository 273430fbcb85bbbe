package protocol

import (
	"encoding/json"
	"fmt"
)

// ServerFrame is a decoded server frame: Type, and for the types a
// client acts on, the one field that holds the frame. A frame of a type
// this package does not know has only Type set, so a client can skip it.
type ServerFrame struct {
	Type      string
	Ack       *SubscribeAck   // subscribe_ack
	SubErr    *SubscribeError // subscribe_error
	Snapshot  *Snapshot       // snapshot
	Event     *EventEnvelope  // event
	Heartbeat *Heartbeat      // ping, pong
	Error     *Error          // error
	Close     *CloseFrame     // close (SSE)
}

// DecodeServerFrame decodes a frame the server sent. It is lenient, as a
// client should be (unknown fields and frame types are not errors), and
// fails only on a frame that is not a JSON object with a string type, or
// whose body does not fit its type; the frame's Type is then still set
// when it could be read.
func DecodeServerFrame(b []byte) (ServerFrame, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return ServerFrame{}, fmt.Errorf("protocol: server frame: %w", err)
	}
	f := ServerFrame{Type: head.Type}
	var into any
	switch head.Type {
	case TypeSubscribeAck:
		f.Ack = new(SubscribeAck)
		into = f.Ack
	case TypeSubscribeError:
		f.SubErr = new(SubscribeError)
		into = f.SubErr
	case TypeSnapshot:
		f.Snapshot = new(Snapshot)
		into = f.Snapshot
	case TypeEvent:
		var ef struct {
			Event *EventEnvelope `json:"event"`
		}
		if err := json.Unmarshal(b, &ef); err != nil {
			return ServerFrame{Type: head.Type}, fmt.Errorf("protocol: %s frame: %w", head.Type, err)
		}
		if ef.Event == nil {
			return ServerFrame{Type: head.Type}, fmt.Errorf("protocol: event frame without an event")
		}
		f.Event = ef.Event
		return f, nil
	case TypePing, TypePong:
		f.Heartbeat = new(Heartbeat)
		into = f.Heartbeat
	case TypeError:
		f.Error = new(Error)
		into = f.Error
	case TypeClose:
		f.Close = new(CloseFrame)
		into = f.Close
	default:
		return f, nil
	}
	if err := json.Unmarshal(b, into); err != nil {
		return ServerFrame{Type: head.Type}, fmt.Errorf("protocol: %s frame: %w", head.Type, err)
	}
	return f, nil
}
