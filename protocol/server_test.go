package protocol_test

import (
	"testing"

	"github.com/metis-agent/metis/protocol"
)

// TestDecodeServerFrame: each server frame type lands in its field; an
// unknown type is not an error (clients skip it); a frame whose body
// does not fit its type fails but still names the type.
func TestDecodeServerFrame(t *testing.T) {
	ok := []struct {
		frame string
		check func(protocol.ServerFrame) bool
	}{
		{`{"type":"subscribe_ack","replay_event_count":3,"seam_event_id":"evt_1","extra":1}`,
			func(f protocol.ServerFrame) bool { return f.Ack.ReplayEventCount == 3 && f.Ack.SeamEventID == "evt_1" }},
		{`{"type":"subscribe_error","code":"cursor_expired","message":"m"}`,
			func(f protocol.ServerFrame) bool { return f.SubErr.Code == protocol.CodeCursorExpired }},
		{`{"type":"snapshot","session":{"id":"s"},"messages":[],"snapshot_at_event_id":"evt_2"}`,
			func(f protocol.ServerFrame) bool { return f.Snapshot.SnapshotAtEventID == "evt_2" }},
		{`{"type":"event","event":{"id":"evt_3","type":"text.delta","session_id":"s","turn_id":null,"payload":{"text":"x"}}}`,
			func(f protocol.ServerFrame) bool { return f.Event.ID == "evt_3" && f.Event.TurnID == nil }},
		{`{"type":"ping","nonce":"n1"}`, func(f protocol.ServerFrame) bool { return f.Heartbeat.Nonce == "n1" }},
		{`{"type":"error","code":"unknown_frame_type","message":"m"}`,
			func(f protocol.ServerFrame) bool { return f.Error.Code == protocol.CodeUnknownFrameType }},
		{`{"type":"telemetry","whatever":[1,2]}`,
			func(f protocol.ServerFrame) bool { return f.Type == "telemetry" && f.Event == nil && f.Ack == nil }},
	}
	for _, c := range ok {
		f, err := protocol.DecodeServerFrame([]byte(c.frame))
		if err != nil || !c.check(f) {
			t.Errorf("%s: %+v, %v", c.frame, f, err)
		}
	}
	bad := []struct{ frame, typ string }{
		{`not json`, ""},
		{`{"type":3}`, ""},
		{`{"type":"event"}`, "event"},
		{`{"type":"event","event":"x"}`, "event"},
		{`{"type":"subscribe_ack","replay_event_count":"many"}`, "subscribe_ack"},
		{`{"type":"snapshot","messages":{}}`, "snapshot"},
	}
	for _, c := range bad {
		f, err := protocol.DecodeServerFrame([]byte(c.frame))
		if err == nil || f.Type != c.typ {
			t.Errorf("%s: type %q, err %v; want an error naming %q", c.frame, f.Type, err, c.typ)
		}
	}
}
