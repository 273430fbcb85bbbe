package agent

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// tool.completed carries structured output and images up to their
// bounds; beyond them it describes them (sizes) without the data.
func TestToolOutputInEventsIsBounded(t *testing.T) {
	if o := outputOf(tool.Result{Content: "x"}); o.StructuredContent != nil || o.Images != nil || o.StructuredContentBytes != 0 {
		t.Fatalf("no output: %+v", o)
	}
	big := json.RawMessage(`"` + string(bytes.Repeat([]byte("s"), structuredEventBytes)) + `"`)
	o := outputOf(tool.Result{Output: &tool.Output{Structured: big}})
	if o.StructuredContent != nil || o.StructuredContentBytes != len(big) {
		t.Fatalf("large structured content: %d bytes kept, size %d", len(o.StructuredContent), o.StructuredContentBytes)
	}
	half := make([]byte, imagesEventBytes/2+1)
	o = outputOf(tool.Result{Output: &tool.Output{Images: []tool.Image{{MediaType: "image/png", Data: half}, {MediaType: "image/gif", Data: half},
		{MediaType: "image/webp", Data: []byte("tiny")}}}})
	if len(o.Images) != 3 || o.Images[0].Data == nil || o.Images[1].Data != nil || o.Images[1].Bytes != len(half) || string(o.Images[2].Data) != "tiny" {
		t.Fatalf("images: %d, data kept %v %v %v", len(o.Images), o.Images[0].Data != nil, o.Images[1].Data != nil, o.Images[2].Data != nil)
	}
}
