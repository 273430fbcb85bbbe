package client_test

import (
	"encoding/json"
	"testing"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// TestViewFollowsBackgroundCommands: the snapshot's background_commands
// and the tool.background_* events after it make one list, by id; a
// start seen again after the snapshot (which is at least as new as its
// seam) or after the end changes nothing; the view survives Clone.
func TestViewFollowsBackgroundCommands(t *testing.T) {
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{SnapshotAtEventID: "evt_01",
		Session: json.RawMessage(`{"id":"s1","background_commands":[{"id":"bg_a","command":"npm run dev","started_at":"2026-01-01T00:00:00Z","running":false,"exit_code":0,"end_reason":"exited","ended_at":"2026-01-01T00:01:00Z"}]}`)})
	apply := func(id, typ, payload string) {
		t.Helper()
		if !v.Apply(&protocol.EventEnvelope{ID: id, Type: typ, SessionID: "s1", TS: "2026-01-01T00:02:00Z", Payload: json.RawMessage(payload)}) {
			t.Fatalf("%s not known", typ)
		}
	}
	apply("evt_02", "tool.background_started", `{"background_id":"bg_a","command":"npm run dev","started_at":"2026-01-01T00:00:00Z"}`)
	apply("evt_03", "tool.background_started", `{"background_id":"bg_b","command":"go test ./... -run X","tool_use_id":"tu1","started_at":"2026-01-01T00:02:00Z"}`)
	cs := v.Clone().BackgroundCommands()
	if len(cs) != 2 || cs[0].ID != "bg_a" || cs[0].Running || cs[0].ExitCode == nil || *cs[0].ExitCode != 0 ||
		cs[1].ID != "bg_b" || !cs[1].Running || cs[1].ToolUseID != "tu1" {
		t.Fatalf("after the starts: %+v", cs)
	}
	apply("evt_04", "tool.background_exited", `{"background_id":"bg_b","command":"go test ./... -run X","exit_code":null,"reason":"killed","started_at":"2026-01-01T00:02:00Z","ended_at":"2026-01-01T00:03:00Z","duration_ms":60000,"output_bytes":10}`)
	cs = v.BackgroundCommands()
	if cs[1].Running || cs[1].ExitCode != nil || cs[1].EndReason != protocol.BackgroundKilled || cs[1].EndedAt == nil {
		t.Fatalf("after the end: %+v", cs[1])
	}
	apply("evt_05", "tool.background_exited", `{"background_id":""}`) // dropped, not a crash
	if len(v.BackgroundCommands()) != 2 {
		t.Fatal("an event without an id was taken")
	}
	var _ client.BackgroundCommand = cs[0]
}
