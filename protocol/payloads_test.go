package protocol_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/metis-agent/metis/protocol"
)

// TestEveryEventTypeHasAPayload: each catalog type has its own payload
// struct, and an unknown type has none.
func TestEveryEventTypeHasAPayload(t *testing.T) {
	seen := map[reflect.Type]protocol.EventType{}
	for _, i := range protocol.EventCatalog() {
		p := protocol.NewPayload(i.Type)
		if p == nil {
			t.Errorf("%s: no payload", i.Type)
			continue
		}
		rt := reflect.TypeOf(p)
		if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
			t.Errorf("%s: payload %T is not a pointer to a struct", i.Type, p)
		}
		if other, dup := seen[rt]; dup {
			t.Errorf("%s and %s share the payload %T", i.Type, other, p)
		}
		seen[rt] = i.Type
	}
	if p := protocol.NewPayload("made.up"); p != nil {
		t.Errorf("an unknown type has a payload: %T", p)
	}
}

// TestPayloadDecodesStrictly: a payload the server sends decodes into its
// struct with no unknown field, and encodes back to the same JSON.
func TestPayloadDecodesStrictly(t *testing.T) {
	for typ, raw := range map[protocol.EventType]string{
		protocol.EventThinkingDelta: `{"message_id":"msg_1","content_block_index":0,"text":"hm","signature":null}`,
		protocol.EventToolFailed:    `{"tool_use_id":"tu_1","tool_name":"shell","error_class":"cancelled","message":"cancelled","started":true,"duration_ms":12}`,
		protocol.EventToolCompleted: `{"tool_use_id":"tu_2","tool_name":"edit_file","summary":"edited a.go","result":"ok","duration_ms":3,"paths":["a.go"],"diff":"--- a/a.go\n+++ b/a.go\n@@ -1 +1 @@\n-x\n+y\n","diff_truncated":true}`,
		protocol.EventTurnStarted:   `{"user_message":{"id":"msg_0","role":"user","content":[{"type":"text","text":"hi"}],"status":"complete"}}`,
	} {
		p := protocol.NewPayload(typ)
		dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(p); err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		back, _ := json.Marshal(p)
		if string(back) != raw {
			t.Errorf("%s: encodes back as %s, want %s", typ, back, raw)
		}
	}
}
