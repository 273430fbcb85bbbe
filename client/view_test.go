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

// TestShellExitCodeLiveAndFromASnapshot: a shell call's exit code comes
// from tool.completed's exit_code live and, from a snapshot (whose
// stored results carry no exit_code), from the result's first line;
// other tools and a result that is not a shell result have none.
func TestShellExitCodeLiveAndFromASnapshot(t *testing.T) {
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: json.RawMessage(`{"id":"sess_1"}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"m1","role":"assistant","turn_id":"t1","status":"complete","content":[` +
				`{"type":"tool_use","id":"tu1","name":"shell","input":{"command":"exit 3"}},` +
				`{"type":"tool_use","id":"tu2","name":"shell","input":{"command":"true"}},` +
				`{"type":"tool_use","id":"tu3","name":"shell","input":{"command":"sleep 9","background":true}},` +
				`{"type":"tool_use","id":"tu4","name":"read_file","input":{"path":"x"}}]}`),
			json.RawMessage(`{"id":"m2","role":"tool","turn_id":"t1","status":"complete","content":[` +
				`{"type":"tool_result","tool_use_id":"tu1","content":"exit code: 3\nstdout:\nstderr:\noops\n"},` +
				`{"type":"tool_result","tool_use_id":"tu2","content":"exit code: 0\nstdout:\nstderr:\n"},` +
				`{"type":"tool_result","tool_use_id":"tu3","content":"started in the background as bg_1"},` +
				`{"type":"tool_result","tool_use_id":"tu4","content":"exit code: 1\n"}]}`),
		},
		SnapshotAtEventID: "evt_0009",
	})
	code := func(id string) any {
		if c := v.Tools[id].ExitCode; c != nil {
			return *c
		}
		return nil
	}
	for id, want := range map[string]any{"tu1": 3, "tu2": 0, "tu3": nil, "tu4": nil} {
		if got := code(id); got != want {
			t.Errorf("%s: exit code %v, want %v", id, got, want)
		}
	}
	turn := "t2"
	for _, ev := range []struct{ typ, payload string }{
		{"tool.called", `{"tool_use_id":"tu5","tool_name":"shell","input":{"command":"false"}}`},
		{"tool.completed", `{"tool_use_id":"tu5","tool_name":"shell","summary":"exit 1 in 2ms","result":"exit code: 1\nstdout:\nstderr:\n","exit_code":1}`},
	} {
		if !v.Apply(&protocol.EventEnvelope{ID: "evt_" + ev.typ, Type: ev.typ, SessionID: "sess_1", TurnID: &turn, Payload: json.RawMessage(ev.payload)}) {
			t.Fatalf("%s not applied", ev.typ)
		}
	}
	if got := code("tu5"); got != 1 {
		t.Fatalf("live exit code %v, want 1", got)
	}
}

// TestSnapshotRunningToolsAreRunning: a call the snapshot lists as
// started (running_tools) reads running, not pending, before any of its
// output arrives; one not listed stays pending, and one with a result
// stays completed even if listed.
func TestSnapshotRunningToolsAreRunning(t *testing.T) {
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: json.RawMessage(`{"id":"sess_1","current_turn_id":"t1","current_turn_status":"in_flight"}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"m1","role":"assistant","turn_id":"t1","status":"complete","content":[` +
				`{"type":"tool_use","id":"tu1","name":"shell","input":{"command":"make"}},` +
				`{"type":"tool_use","id":"tu2","name":"shell","input":{"command":"make test"}},` +
				`{"type":"tool_use","id":"tu3","name":"read_file","input":{"path":"x"}}]}`),
			json.RawMessage(`{"id":"m2","role":"tool","turn_id":"t1","status":"complete","content":[` +
				`{"type":"tool_result","tool_use_id":"tu3","content":"x"}]}`),
		},
		RunningTools:      []string{"tu1", "tu3", "tu_unknown"},
		SnapshotAtEventID: "evt_0009",
	})
	for id, want := range map[string]string{"tu1": "running", "tu2": "pending", "tu3": "completed"} {
		if got := v.Tools[id].Status; got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	if v.Tools["tu_unknown"] != nil {
		t.Error("a listed id with no tool_use became a call")
	}
}
