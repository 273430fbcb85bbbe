package agent

import (
	"encoding/json"

	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// Bounds of what tool.completed carries of a tool's structured output
// and images (MCP tools); the rest is described, not copied.
const (
	structuredEventBytes = 64 << 10
	imagesEventBytes     = 256 << 10
)

// toolOutput is what tool.completed carries beyond the text result: an
// MCP tool's structuredContent and images (docs/event-catalog.md).
type toolOutput struct {
	// StructuredContent is the tool's structured output when it encodes
	// to at most structuredEventBytes; StructuredContentBytes is its
	// size either way.
	StructuredContent      json.RawMessage `json:"structured_content,omitempty"`
	StructuredContentBytes int             `json:"structured_content_bytes,omitempty"`
	// Images describes each image the tool returned, with its data
	// (base64) while the images of the call together stay within
	// imagesEventBytes.
	Images []protocol.ToolImage `json:"images,omitempty"`
}

func outputOf(res tool.Result) toolOutput {
	var o toolOutput
	if res.Output == nil {
		return o
	}
	if n := len(res.Output.Structured); n > 0 {
		o.StructuredContentBytes = n
		if n <= structuredEventBytes && json.Valid(res.Output.Structured) {
			o.StructuredContent = res.Output.Structured
		}
	}
	budget := imagesEventBytes
	for _, im := range res.Output.Images {
		out := protocol.ToolImage{MediaType: im.MediaType, Bytes: len(im.Data)}
		if len(im.Data) <= budget {
			out.Data, budget = im.Data, budget-len(im.Data)
		}
		o.Images = append(o.Images, out)
	}
	return o
}
