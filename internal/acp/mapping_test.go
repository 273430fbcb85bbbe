package acp

import (
	"encoding/json"
	"errors"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/protocol"
)

func TestToolKinds(t *testing.T) {
	want := map[string]sdk.ToolKind{"read_file": sdk.ToolKindRead, "write_file": sdk.ToolKindEdit, "list_dir": sdk.ToolKindSearch,
		"shell": sdk.ToolKindExecute, "delegate": sdk.ToolKindThink, "mystery": sdk.ToolKindOther}
	for name, k := range want {
		if got := toolKind(name); got != k {
			t.Errorf("%s: kind %q, want %q", name, got, k)
		}
	}
	if got := toolTitle("shell", json.RawMessage(`{"command":"go test ./...\necho done"}`)); got != "Run go test ./... …" {
		t.Errorf("shell title %q", got)
	}
	if got := toolLocations("write_file", json.RawMessage(`{"path":"a/b.go"}`), "/ws"); len(got) != 1 || got[0].Path != "/ws/a/b.go" {
		t.Errorf("locations %+v", got)
	}
}

// The end of a turn maps to the prompt's answer.
func TestFinishMapping(t *testing.T) {
	cases := []struct {
		typ  protocol.EventType
		p    turnEndPayload
		stop sdk.StopReason
		err  bool
	}{
		{protocol.EventTurnCompleted, turnEndPayload{Outcome: "completed", StopReason: "end_turn"}, sdk.StopReasonEndTurn, false},
		{protocol.EventTurnCompleted, turnEndPayload{Outcome: "completed", StopReason: "stop_sequence"}, sdk.StopReasonEndTurn, false},
		{protocol.EventTurnCompleted, turnEndPayload{Outcome: "completed", StopReason: "max_tokens"}, sdk.StopReasonMaxTokens, false},
		{protocol.EventTurnCompleted, turnEndPayload{Outcome: "failed", ErrorClass: "max_llm_calls"}, sdk.StopReasonMaxTurnRequests, false},
		{protocol.EventTurnCancelled, turnEndPayload{Reason: "user_cancel"}, sdk.StopReasonCancelled, false},
		{protocol.EventTurnCancelled, turnEndPayload{Reason: "server_shutdown"}, sdk.StopReasonCancelled, false},
		{protocol.EventTurnCompleted, turnEndPayload{Outcome: "failed", ErrorClass: "auth"}, "", true},
	}
	for _, c := range cases {
		tr := &turn{id: "turn_1", stop: func() {}}
		tr.finish(c.typ, c.p)
		var re *sdk.RequestError
		switch {
		case c.err && (tr.err == nil || !errors.As(tr.err, &re) || re.Code != codeTurnFailed):
			t.Errorf("%s %+v: want a turn-failed error, got %v", c.typ, c.p, tr.err)
		case !c.err && (tr.result == nil || tr.result.StopReason != c.stop):
			t.Errorf("%s %+v: answer %+v, want %s", c.typ, c.p, tr.result, c.stop)
		}
	}
}

func TestPromptText(t *testing.T) {
	got, imgs, err := promptText([]sdk.ContentBlock{sdk.TextBlock("look at"), sdk.ResourceLinkBlock("main.go", "file:///ws/main.go")})
	if err != nil || got != "look at\n[main.go](file:///ws/main.go)" || len(imgs) != 0 {
		t.Errorf("%q, %v", got, err)
	}
	if _, _, err := promptText([]sdk.ContentBlock{sdk.TextBlock("  ")}); err == nil {
		t.Error("an empty prompt was taken")
	}
	// Images are taken, their bytes decoded (the server checks them).
	got, imgs, err = promptText([]sdk.ContentBlock{sdk.TextBlock("what is this?"), sdk.ImageBlock("AAEC", "image/png")})
	if err != nil || got != "what is this?" || len(imgs) != 1 || imgs[0].MediaType != "image/png" || string(imgs[0].Data) != "\x00\x01\x02" {
		t.Errorf("with an image: %q %+v %v", got, imgs, err)
	}
	if got, imgs, err = promptText([]sdk.ContentBlock{sdk.ImageBlock("AAEC", "image/png")}); err != nil || got != imagesOnly || len(imgs) != 1 {
		t.Errorf("an image alone: %q %+v %v", got, imgs, err)
	}
	if _, _, err := promptText([]sdk.ContentBlock{sdk.ImageBlock("not base64!", "image/png")}); err == nil {
		t.Error("an image that is not base64 was taken")
	}
	if _, _, err := promptText([]sdk.ContentBlock{sdk.AudioBlock("AA==", "audio/wav")}); err == nil {
		t.Error("audio was taken")
	}
}
