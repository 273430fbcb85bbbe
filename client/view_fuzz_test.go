package client_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// quiet discards the view's debug logs.
var quiet = slog.New(slog.DiscardHandler)

// maxFuzzOps bounds the operations of one fuzz input, to keep each run
// fast.
const maxFuzzOps = 64

// catalogTypes are the known event types, drawn by a one-byte type
// field of a fuzz event.
var catalogTypes = func() []string {
	var ts []string
	for _, i := range protocol.EventCatalog() {
		ts = append(ts, string(i.Type))
	}
	return ts
}()

// applyFrame folds one server frame into v the way Follow does, with
// protocol.DecodeServerFrame; a frame that does not decode is skipped. It reports whether the frame changed v's input (an event or
// a snapshot).
func applyFrame(v *client.View, data []byte) (*protocol.EventEnvelope, bool) {
	f, err := protocol.DecodeServerFrame(data)
	switch {
	case err != nil:
		return nil, false
	case f.Snapshot != nil:
		v.ApplySnapshot(f.Snapshot)
		return nil, true
	case f.Event != nil:
		v.Apply(f.Event)
		return f.Event, true
	}
	return nil, false
}

// eventFrame builds an event frame from a fuzz line's fields: a type of
// one byte names a catalog type, anything else is the type itself; an
// empty turn is null; the payload goes in raw (a frame it breaks does
// not decode, as on the wire).
func eventFrame(typ, id, turn, payload string) []byte {
	if len(typ) == 1 {
		typ = catalogTypes[int(typ[0])%len(catalogTypes)]
	}
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	turnJSON := "null"
	if turn != "" {
		turnJSON = str(turn)
	}
	if strings.TrimSpace(payload) == "" {
		payload = "{}"
	}
	return []byte(`{"type":"event","event":{"id":` + str(id) + `,"type":` + str(typ) + `,"session_id":"sess_f","turn_id":` +
		turnJSON + `,"ts":"2025-01-01T00:00:00Z","actor":"model","payload":` + payload + `}}`)
}

// checkIDs checks that messages have unique, indexed ids and no nil
// entries.
func checkIDs(t *testing.T, v *client.View) {
	t.Helper()
	seen := map[string]bool{}
	for i, m := range v.Messages {
		if m == nil {
			t.Fatalf("message %d is nil", i)
		}
		if seen[m.ID] {
			t.Fatalf("message id %q twice", m.ID)
		}
		seen[m.ID] = true
		if v.Message(m.ID) != m {
			t.Fatalf("message %q not indexed", m.ID)
		}
	}
}

// checkView checks the view's invariants: checkIDs; every message
// renders; the view encodes; and Clone round-trips (same encoding, every
// message found by id).
func checkView(t *testing.T, v *client.View) []byte {
	t.Helper()
	checkIDs(t, v)
	for _, m := range v.Messages {
		_ = m.Text()
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("view does not encode: %v", err)
	}
	c := v.Clone()
	cb, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("clone does not encode: %v", err)
	}
	if !bytes.Equal(b, cb) {
		t.Fatalf("clone differs:\n view  %s\n clone %s", b, cb)
	}
	for _, m := range c.Messages {
		if c.Message(m.ID) != m {
			t.Fatalf("clone: message %q not indexed", m.ID)
		}
	}
	return b
}

var viewSeeds = []string{
	// A turn with text, thinking and a tool call, then its result.
	"E\tturn.started\tevt_01\tt1\t" + `{"user_message":{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}],"status":"complete"}}` + "\n" +
		"E\tmessage.start\tevt_02\tt1\t" + `{"message_id":"m2","role":"assistant","model":"anthropic:claude"}` + "\n" +
		"E\tthinking.delta\tevt_03\tt1\t" + `{"message_id":"m2","content_block_index":0,"text":"hmm","signature":"sig"}` + "\n" +
		"E\ttext.delta\tevt_04\tt1\t" + `{"message_id":"m2","content_block_index":1,"text":"Let me look."}` + "\n" +
		"E\ttool.use_start\tevt_05\tt1\t" + `{"message_id":"m2","content_block_index":2,"tool_use_id":"tu1","tool_name":"list_dir"}` + "\n" +
		"E\ttool.use_input_delta\tevt_06\tt1\t" + `{"message_id":"m2","content_block_index":2,"tool_use_id":"tu1","partial_json":"{\"path\":"}` + "\n" +
		"E\ttool.use_input_delta\tevt_07\tt1\t" + `{"message_id":"m2","content_block_index":2,"tool_use_id":"tu1","partial_json":"\".\"}"}` + "\n" +
		"E\ttool.use_end\tevt_08\tt1\t" + `{"message_id":"m2","content_block_index":2,"tool_use_id":"tu1","final_input":{"path":"."}}` + "\n" +
		"E\tmessage.complete\tevt_09\tt1\t" + `{"message_id":"m2","stop_reason":"tool_use","final_content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"Let me look."},{"type":"tool_use","id":"tu1","name":"list_dir","input":{"path":"."}}],"usage":{"input_tokens":10,"output_tokens":5,"cost_usd":0.001}}` + "\n" +
		"E\tllm.call_completed\tevt_10\tt1\t" + `{"message_id":"m2","usage":{"input_tokens":10,"output_tokens":5,"cost_usd":0.001}}` + "\n" +
		"E\ttool.called\tevt_11\tt1\t" + `{"tool_use_id":"tu1","tool_name":"list_dir","input":{"path":"."}}` + "\n" +
		"E\ttool.completed\tevt_12\tt1\t" + `{"tool_use_id":"tu1","summary":"1 file","result":"a.go"}` + "\n" +
		"E\tturn.completed\tevt_13\tt1\t" + `{"outcome":"completed"}` + "\n" +
		"E\tfeedback.submitted\tevt_14\tt1\t" + `{"rating":"up"}`,
	// Failures, cancellation and delegation.
	"E\tmessage.start\tevt_01\tt2\t" + `{"message_id":"m1"}` + "\n" +
		"E\tllm.call_failed\tevt_02\tt2\t" + `{"message_id":"m1","error_class":"rate_limited","message":"slow down"}` + "\n" +
		"E\ttool.failed\tevt_03\tt2\t" + `{"tool_use_id":"tu9","error_class":"cancelled","message":"x"}` + "\n" +
		"E\tdelegate.started\tevt_04\tt2\t" + `{"worker_session_id":"w1","task":"look","model":"m"}` + "\n" +
		"E\tdelegate.failed\tevt_05\tt2\t" + `{"worker_session_id":"w1","failure_mode":"timeout","cost_usd":0.5}` + "\n" +
		"E\tturn.cancelled\tevt_06\tt2\t" + `{"reason":"user_cancel"}` + "\n" +
		"E\tturn.completed\tevt_07\tt2\t" + `{"outcome":"failed","error_class":"provider_error"}`,
	// A snapshot, an older page, then events; raw frames too.
	"S" + `{"type":"snapshot","session":{"id":"sess_f","cost_so_far_usd":0.25,"current_turn_id":"t3"},"messages":[{"id":"m3","role":"tool","status":"complete","content":[{"type":"tool_result","tool_use_id":"tu1","content":"a.go"}]},{"id":"m4","role":"assistant","status":"complete","content":[{"type":"text","text":"One."}]}],"has_more_messages":true,"snapshot_at_event_id":"evt_05"}` + "\n" +
		"P1" + `[{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"list_dir","input":{}}]},{"id":"m3"}]` + "\n" +
		"P0" + `[{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}]` + "\n" +
		"E\ttext.delta\tevt_04\tt3\t" + `{"message_id":"m4","content_block_index":0,"text":"replayed"}` + "\n" +
		"E\ttext.delta\tevt_06\tt3\t" + `{"message_id":"m5","content_block_index":0,"text":"new"}` + "\n" +
		`{"type":"event","event":{"id":"evt_07","type":"text.delta","turn_id":"t3","payload":{"message_id":"m5","content_block_index":0,"text":"!"}}}` + "\n" +
		`{"type":"ping","nonce":"n"}`,
	// Unknown types, catalog types by byte, odd ids and payloads.
	"E\tmade.up\tevt_02\t\t{}\n" +
		"E\t\x07\t\t\tnull\n" +
		"E\t\x1b\tevt_01\tt\t[]\n" +
		"E\ttext.delta\tevt_03\tt\t\"str\"\n" +
		"E\ttext.delta\tevt_04\tt\t{\"message_id\":\"\",\"content_block_index\":3,\"text\":\"gap\"}\n" +
		"E\ttool.use_input_delta\tevt_05\tt\t{\"message_id\":\"\",\"content_block_index\":3,\"partial_json\":\"{\"}\n" +
		"E\tmessage.complete\tevt_06\tt\t{\"message_id\":\"\",\"final_content\":null}\n" +
		"E\tsession.created\t\xff\xfe\tt\t{}",
	// Hostile indexes (-1 panicked, 1e12 grew a message's blocks without
	// bound), null blocks (nil dereferences), costs whose sum overflowed
	// to +Inf (the view no longer encoded, so Clone returned an empty
	// view).
	"E\ttext.delta\tevt_01\tt\t{\"message_id\":\"m\",\"content_block_index\":-1,\"text\":\"x\"}\n" +
		"E\ttext.delta\tevt_02\tt\t{\"message_id\":\"m\",\"content_block_index\":1000000000000,\"text\":\"x\"}\n" +
		"E\tturn.started\tevt_03\tt\t{\"user_message\":{\"id\":\"u\",\"content\":[null,{\"type\":\"text\"}]}}\n" +
		"E\ttext.delta\tevt_04\tt\t{\"message_id\":\"u\",\"content_block_index\":0,\"text\":\"x\"}\n" +
		"E\tmessage.complete\tevt_05\tt\t{\"message_id\":\"m\",\"final_content\":[null,{\"type\":\"tool_use\",\"id\":\"tu\"}]}\n" +
		"E\tllm.call_completed\tevt_06\tt\t{\"usage\":{\"cost_usd\":1e308}}\n" +
		"E\tllm.call_completed\tevt_07\tt\t{\"usage\":{\"cost_usd\":1e308}}\n" +
		"E\tllm.call_failed\tevt_08\tt\t{\"usage\":{\"cost_usd\":-1.7976931348623157e308},\"error_class\":\"x\"}",
	// Renames and archives of the snapshot's session (session.updated),
	// some malformed, one of a summary that is not an object.
	"S" + `{"type":"snapshot","session":{"id":"sess_f","title":"t"},"messages":[],"snapshot_at_event_id":"evt_01"}` + "\n" +
		"E\tsession.updated\tevt_02\t\t" + `{"title":"renamed","archived":true}` + "\n" +
		"E\tsession.updated\tevt_03\t\t" + `{"title":null,"archived":false}` + "\n" +
		"E\tsession.updated\tevt_04\t\t" + `{"title":["x"]}` + "\n" +
		"S" + `{"type":"snapshot","session":"sess_f","messages":[],"snapshot_at_event_id":"evt_05"}` + "\n" +
		"E\tsession.updated\tevt_06\t\t" + `{"title":"x"}`,
	"S" + `{"type":"snapshot","session":{"cost_so_far_usd":1.7976931348623157e308},"messages":[{"id":"a","content":[null]},{"id":"a"},{"id":""},5,null],"snapshot_at_event_id":"evt_9"}` + "\n" +
		"E\tllm.call_completed\tevt_99\tt\t{\"usage\":{\"cost_usd\":1.7976931348623157e308}}\n" +
		"P0" + `[{"id":"b","content":[null]},{"id":"b"},null,{"id":"a"}]`,
}

// FuzzViewApply: a View folding any mix of server frames, event
// envelopes (catalog or made-up types, any payload, ids and turn ids),
// snapshots and pages of older messages never panics; its messages keep
// unique, indexed ids; LastEventID never falls behind an event seen
// since the last snapshot; the view always encodes and Clone
// round-trips; and an event at or before LastEventID changes nothing (a
// replay overlap).
//
// Each line of the input is one operation: "E\t<type>\t<id>\t<turn>\t
// <payload>" an event (a one-byte type picks from the catalog), "S<json>"
// a snapshot frame, "P<0|1><json array>" a page of older messages, and
// any other line a raw server frame.
func FuzzViewApply(f *testing.F) {
	for _, s := range viewSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := client.NewView(quiet)
		lines := bytes.Split(data, []byte("\n"))
		if len(lines) > maxFuzzOps {
			lines = lines[:maxFuzzOps]
		}
		var seen []*protocol.EventEnvelope
		for _, line := range lines {
			var ev *protocol.EventEnvelope
			switch {
			case bytes.HasPrefix(line, []byte("E\t")):
				fields := strings.SplitN(string(line[2:]), "\t", 4)
				for len(fields) < 4 {
					fields = append(fields, "")
				}
				ev, _ = applyFrame(v, eventFrame(fields[0], fields[1], fields[2], fields[3]))
			case bytes.HasPrefix(line, []byte("S")):
				applyFrame(v, line[1:])
			case bytes.HasPrefix(line, []byte("P")) && len(line) >= 2:
				var page []json.RawMessage
				if json.Unmarshal(line[2:], &page) == nil {
					before := len(v.Messages)
					n := v.PrependMessages(page, line[1] == '1')
					if n < 0 || n > len(page) || len(v.Messages) != before+n {
						t.Fatalf("PrependMessages added %d of %d: %d → %d messages", n, len(page), before, len(v.Messages))
					}
				}
			default:
				ev, _ = applyFrame(v, line)
			}
			checkIDs(t, v)
			if ev != nil && ev.ID != "" {
				if ev.ID > v.LastEventID {
					t.Fatalf("LastEventID %q before the event's %q", v.LastEventID, ev.ID)
				}
				seen = append(seen, ev)
			}
		}
		// The whole-view checks run once: a view can hold thousands of
		// blocks, and encoding it after every line makes runs slow.
		enc := checkView(t, v)
		// Every event at or before LastEventID is a replay overlap now:
		// seeing it again changes nothing.
		for _, ev := range seen {
			if ev.ID <= v.LastEventID {
				v.Apply(ev)
			}
		}
		if again, _ := json.Marshal(v); !bytes.Equal(again, enc) {
			t.Fatalf("events replayed:\n once  %s\n twice %s", enc, again)
		}
	})
}
