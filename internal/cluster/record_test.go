package cluster_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
)

// groupOps is a group with one op of every kind a record carries.
func groupOps(sessionID string, ev *event.Event) []store.Op {
	now := time.Date(2026, 11, 24, 4, 0, 0, 123456789, time.UTC)
	return []store.Op{
		store.CreateSession{Session: store.Session{ID: sessionID, WorkspacePath: "/w", ActiveModel: "builtin:demo", CreatedAt: now, LastActivityAt: now}},
		store.UpdateSession{ID: sessionID, ActiveModel: "openai:gpt-4.1", RoutingPolicyVersion: "v2"},
		store.AddUsage{SessionID: sessionID, CostUSD: 0.0123, Turns: 1},
		store.PutMessage{EventID: ev.ID, Message: message.Message{
			ID: "msg_1", SessionID: sessionID, TurnID: "turn_1", Role: message.RoleAssistant, Status: message.StatusComplete,
			Content: []message.Block{message.Text("hello\nworld"), {Type: message.BlockThinking, Thinking: "hm", Signature: "sig"},
				{Type: message.BlockToolUse, ID: "tu_1", Name: "read_file", Input: json.RawMessage(`{"path":"a"}`)}},
		}},
		store.PutTurn{Turn: store.Turn{ID: "turn_1", SessionID: sessionID, Status: store.TurnCompleted, StartedAt: now, EndedAt: now.Add(time.Second),
			CheckpointID: "cp_1", AfterCheckpointID: "cp_2", Changes: json.RawMessage(`{"files":[{"path":"a","kind":"modified"}]}`)}},
		store.SetTitle{SessionID: sessionID, Title: "a title"},
		store.PutToolCall{Call: store.ToolCall{ID: "tu_1", SessionID: sessionID, TurnID: "turn_1", MessageID: "msg_1", Name: "read_file",
			Input: json.RawMessage(`{"path":"a"}`), Status: store.ToolCompleted, Result: "x", CreatedAt: now, UpdatedAt: now}},
		store.Rename{SessionID: sessionID, Title: "renamed"},
		store.SetArchived{SessionID: sessionID, Archived: true},
		store.QueueTurn{Turn: store.QueuedTurn{TurnID: "turn_2", SessionID: sessionID, Model: "openai:gpt-4.1", Source: "steer", QueuedAt: now, QueuedEventID: ev.ID,
			Message: message.Message{ID: "msg_2", SessionID: sessionID, Role: message.RoleUser, Status: message.StatusComplete,
				Content: []message.Block{message.Text("and"), {Type: message.BlockImage, MediaType: "image/png", SHA256: sha64("a"), Size: 3}}}}},
		store.EndQueuedTurn{TurnID: "turn_2", EventID: ev.ID},
		store.PutImages{SessionID: sessionID, Images: []store.Image{{SHA256: sha64("a"), MediaType: "image/png", Size: 3, Width: 1, Height: 1}}},
		store.LinkImages{SessionID: sessionID, SHA256s: []string{sha64("a"), sha64("b")}},
		store.AppendEvent{Event: ev},
	}
}

// sha64 is a SHA-256 as images are named: 64 hex digits.
func sha64(digit string) string { return strings.Repeat(digit, 64) }

func TestRecordRoundTrip(t *testing.T) {
	sid := newSessionID()
	ev := newEvents(t).make(sid, event.LLMCallCompleted, "turn_1", map[string]any{"text": "line\nbreak"})
	ops := groupOps(sid, ev)
	body, err := cluster.EncodeRecord(ev, ops)
	if err != nil {
		t.Fatal(err)
	}
	got, gotOps, err := cluster.DecodeRecord(body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.JSON(), ev.JSON()) {
		t.Errorf("envelope = %s\nwant %s", got.JSON(), ev.JSON())
	}
	if want := ops[:len(ops)-1]; !reflect.DeepEqual(gotOps, want) {
		t.Errorf("ops = %#v\nwant %#v", gotOps, want)
	}
	// A record carries no image bytes: whoever publishes it puts them in
	// the image bucket.
	withData := []store.Op{store.PutImages{SessionID: sid, Images: []store.Image{{SHA256: sha64("c"), MediaType: "image/png", Size: 4, Data: []byte("\x89PNG")}}}}
	body, err = cluster.EncodeRecord(ev, withData)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(body, []byte(`"Data"`)) || bytes.Contains(body, []byte("iVBO")) {
		t.Errorf("the record carries the image's bytes: %s", body)
	}
	if _, ops, err := cluster.DecodeRecord(body); err != nil || len(ops) != 1 || len(ops[0].(store.PutImages).Images[0].Data) != 0 {
		t.Errorf("decoded %#v, %v", ops, err)
	}
	// An event without ops is its envelope alone.
	bare, err := cluster.EncodeRecord(ev, []store.Op{store.AppendEvent{Event: ev}})
	if err != nil || !bytes.Equal(bare, ev.JSON()) {
		t.Errorf("record without ops = %s (%v), want the envelope", bare, err)
	}
}

func TestEncodeRecordRefusesLocalOps(t *testing.T) {
	sid := newSessionID()
	g := newEvents(t)
	ev, other := g.make(sid, event.TurnStarted, "", map[string]any{}), g.make(sid, event.TurnStarted, "", map[string]any{})
	for name, ops := range map[string][]store.Op{
		"cursor":        {store.SetCursor{Name: "x", Seq: 1}},
		"another event": {store.AppendEvent{Event: other}},
	} {
		if _, err := cluster.EncodeRecord(ev, ops); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestDecodeRecordRefusesBadBodies(t *testing.T) {
	sid := newSessionID()
	g := newEvents(t)
	cat := g.make(sid, event.TurnStarted, "", map[string]any{})
	delta := g.make(sid, event.TextDelta, "", map[string]any{})
	for name, body := range map[string][]byte{
		"empty":             nil,
		"not json":          []byte("nope"),
		"no id":             []byte(`{"type":"turn.started","session_id":"s"}`),
		"unknown type":      []byte(`{"id":"evt_1","type":"nope","session_id":"s"}`),
		"ops not an array":  append(append(bytes.Clone(cat.JSON()), '\n'), `{}`...),
		"unknown op":        append(append(bytes.Clone(cat.JSON()), '\n'), `[{"kind":"drop_table","op":{}}]`...),
		"empty op":          append(append(bytes.Clone(cat.JSON()), '\n'), `[{"kind":"put_turn"}]`...),
		"ops on a delta":    append(append(bytes.Clone(delta.JSON()), '\n'), `[]`...),
		"op of wrong shape": append(append(bytes.Clone(cat.JSON()), '\n'), `[{"kind":"put_turn","op":[1]}]`...),
		"image bytes":       withOp(cat, `{"kind":"put_images","op":{"SessionID":"s","Images":[{"SHA256":"`+sha64("a")+`","Size":3,"Data":"AAAA"}]}}`),
		"image not a hash":  withOp(cat, `{"kind":"put_images","op":{"SessionID":"s","Images":[{"SHA256":"../../etc","Size":3}]}}`),
		"image upper hex":   withOp(cat, `{"kind":"put_images","op":{"SessionID":"s","Images":[{"SHA256":"`+sha64("A")+`","Size":3}]}}`),
		"image size 0":      withOp(cat, `{"kind":"put_images","op":{"SessionID":"s","Images":[{"SHA256":"`+sha64("a")+`","Size":0}]}}`),
		"image too large":   withOp(cat, `{"kind":"put_images","op":{"SessionID":"s","Images":[{"SHA256":"`+sha64("a")+`","Size":1e12}]}}`),
		"no images":         withOp(cat, `{"kind":"put_images","op":{"SessionID":"s","Images":[]}}`),
		"images no session": withOp(cat, `{"kind":"put_images","op":{"Images":[{"SHA256":"`+sha64("a")+`","Size":3}]}}`),
		"link not a hash":   withOp(cat, `{"kind":"link_images","op":{"SessionID":"s","SHA256s":["x"]}}`),
		"link no session":   withOp(cat, `{"kind":"link_images","op":{"SHA256s":["`+sha64("a")+`"]}}`),
		"link extra field":  withOp(cat, `{"kind":"link_images","op":{"SessionID":"s","SHA256s":["`+sha64("a")+`"],"Drop":1}}`),
	} {
		if _, _, err := cluster.DecodeRecord(body); !errors.Is(err, cluster.ErrRecord) {
			t.Errorf("%s: err = %v, want ErrRecord", name, err)
		}
	}
}

// withOp is a record of ev with one raw op.
func withOp(ev *event.Event, op string) []byte {
	return append(append(bytes.Clone(ev.JSON()), '\n'), "["+op+"]"...)
}

func FuzzDecodeRecord(f *testing.F) {
	sid := "sess_01JZ0000000000000000000000"
	seq, _ := event.NewSequencer("", nil)
	id, ts := seq.Next()
	ev := &event.Event{ID: id, Type: event.LLMCallCompleted, SessionID: sid, TurnID: "turn_1", TS: ts, Actor: "agent", Payload: json.RawMessage(`{}`)}
	if err := ev.Seal(); err != nil {
		f.Fatal(err)
	}
	body, err := cluster.EncodeRecord(ev, groupOps(sid, ev))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	f.Add(ev.JSON())
	f.Add([]byte("{}\n[]"))
	f.Add([]byte("\n"))
	for _, op := range []string{
		`{"kind":"put_images","op":{"SessionID":"s","Images":[{"SHA256":"` + sha64("a") + `","MediaType":"image/png","Size":3,"Width":1,"Height":1}]}}`,
		`{"kind":"link_images","op":{"SessionID":"s","SHA256s":["` + sha64("a") + `"]}}`,
		`{"kind":"rename","op":{"SessionID":"s","Title":"t"}}`,
		`{"kind":"set_archived","op":{"SessionID":"s","Archived":true}}`,
		`{"kind":"end_queued_turn","op":{"TurnID":"turn_1","EventID":"evt_1"}}`,
	} {
		f.Add(withOp(ev, op))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, ops, err := cluster.DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, cluster.ErrRecord) {
				t.Fatalf("error %v does not wrap ErrRecord", err)
			}
			return
		}
		// A decoded record encodes again and decodes to the same ops.
		again, err := cluster.EncodeRecord(ev, ops)
		if err != nil {
			return // an envelope that is valid JSON but not canonical may not re-encode
		}
		_, ops2, err := cluster.DecodeRecord(again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if len(ops2) != len(ops) {
			t.Fatalf("re-encoded record has %d ops, want %d", len(ops2), len(ops))
		}
	})
}
