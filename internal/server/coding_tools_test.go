package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

func toolCmd(name string, input any) string {
	b, _ := json.Marshal(input)
	return "/tool " + name + " " + string(b)
}

// TestCodingToolsThroughTheServer: builtin:demo is offered every tool;
// edit_file and apply_patch run through the dispatcher and their
// tool.completed carries the changed paths and the diff; grep and glob
// answer from the workspace.
func TestCodingToolsThroughTheServer(t *testing.T) {
	h := servertest.Start(t, "")
	if err := os.WriteFile(filepath.Join(h.Workspace, "a.go"), []byte("package a\n\nconst X = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sid := h.CreateSession()
	c := attach(t, h, sid)

	turn := h.Submit(sid, toolCmd("edit_file", map[string]string{"path": "a.go", "old_string": "X = 1", "new_string": "X = 2"}))
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	started := payloadOf(t, find(evs, event.LLMCallStarted)[0])
	var offered []string
	for _, n := range started["request"].(map[string]any)["tools"].([]any) {
		offered = append(offered, n.(string))
	}
	for _, want := range []string{"apply_patch", "edit_file", "glob", "grep", "list_dir", "read_file", "shell", "web_fetch", "write_file"} {
		if !slices.Contains(offered, want) {
			t.Errorf("builtin:demo is not offered %s (offered %v)", want, offered)
		}
	}
	done := payloadOf(t, find(evs, event.ToolCompleted)[0])
	if done["tool_name"] != "edit_file" || !slices.Equal(done["paths"].([]any), []any{"a.go"}) ||
		done["diff"] != "--- a/a.go\n+++ b/a.go\n@@ -1,3 +1,3 @@\n package a\n \n-const X = 1\n+const X = 2\n" {
		t.Fatalf("tool.completed %v", done)
	}
	if _, ok := done["diff_truncated"]; ok {
		t.Errorf("diff_truncated present for a short diff")
	}
	h.WaitTurn(sid)

	turn = h.Submit(sid, toolCmd("apply_patch", map[string]string{"patch": "*** Begin Patch\n*** Update File: a.go\n@@\n-const X = 2\n+const X = 3\n*** Add File: b/b.go\n+package b\n*** End Patch"}))
	evs = c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	done = payloadOf(t, find(evs, event.ToolCompleted)[0])
	if !slices.Equal(done["paths"].([]any), []any{"a.go", "b/b.go"}) || !strings.Contains(done["diff"].(string), "+++ b/b/b.go\n@@ -0,0 +1 @@\n+package b\n") {
		t.Fatalf("apply_patch tool.completed %v", done)
	}
	if b, _ := os.ReadFile(filepath.Join(h.Workspace, "a.go")); string(b) != "package a\n\nconst X = 3\n" {
		t.Fatalf("a.go = %q", b)
	}
	h.WaitTurn(sid)

	turn = h.Submit(sid, toolCmd("grep", map[string]string{"pattern": "const X"}))
	evs = c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	done = payloadOf(t, find(evs, event.ToolCompleted)[0])
	if done["result"] != "a.go:3:const X = 3\n" {
		t.Fatalf("grep tool.completed %v", done)
	}
	if _, ok := done["paths"]; ok {
		t.Errorf("a search reports changed paths: %v", done)
	}
	h.WaitTurn(sid)

	// A failed edit ends with tool.failed invalid_input and changes nothing.
	turn = h.Submit(sid, toolCmd("edit_file", map[string]string{"path": "a.go", "old_string": "nope", "new_string": "x"}))
	evs = c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	failed := payloadOf(t, find(evs, event.ToolFailed)[0])
	if failed["error_class"] != "invalid_input" || !strings.Contains(failed["message"].(string), "not found in a.go") {
		t.Fatalf("tool.failed %v", failed)
	}
}
