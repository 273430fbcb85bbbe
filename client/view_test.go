package client_test

import (
	"encoding/json"
	"testing"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// TestPrependMessagesLoadsOlderPages: a snapshot holding only the latest
// messages says older ones exist; a page of them goes in front, a call
// in the page takes its result from a message already held, and a page
// seen twice adds nothing.
func TestPrependMessagesLoadsOlderPages(t *testing.T) {
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: json.RawMessage(`{"id":"sess_1"}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"m3","role":"tool","turn_id":"t1","status":"complete","content":[{"type":"tool_result","tool_use_id":"tu1","content":"a.go"}]}`),
			json.RawMessage(`{"id":"m4","role":"assistant","turn_id":"t1","status":"complete","content":[{"type":"text","text":"One file."}]}`),
		},
		HasMoreMessages: true,
	})
	if !v.HasOlder {
		t.Fatal("HasOlder false after a snapshot with has_more_messages")
	}
	page := []json.RawMessage{
		json.RawMessage(`{"id":"m1","role":"user","turn_id":"t1","status":"complete","content":[{"type":"text","text":"what is here?"}]}`),
		json.RawMessage(`{"id":"m2","role":"assistant","turn_id":"t1","status":"complete","content":[{"type":"tool_use","id":"tu1","name":"list_dir","input":{"path":"."}}]}`),
	}
	if n := v.PrependMessages(page, false); n != 2 {
		t.Fatalf("added %d messages, want 2", n)
	}
	var ids []string
	for _, m := range v.Messages {
		ids = append(ids, m.ID)
	}
	if len(ids) != 4 || ids[0] != "m1" || ids[1] != "m2" || ids[3] != "m4" {
		t.Fatalf("order %v", ids)
	}
	if tc := v.Tools["tu1"]; tc == nil || tc.Status != "completed" || tc.Result != "a.go" {
		t.Fatalf("tool call from the older page: %+v", tc)
	}
	if v.HasOlder || v.Message("m1") == nil {
		t.Fatalf("HasOlder %v, m1 indexed %v", v.HasOlder, v.Message("m1") != nil)
	}
	if n := v.PrependMessages(page, false); n != 0 || len(v.Messages) != 4 {
		t.Fatalf("a page seen twice added %d (now %d messages)", n, len(v.Messages))
	}
}
