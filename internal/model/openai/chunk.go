package openai

import (
	"encoding/json"

	sdk "github.com/openai/openai-go/v3"
)

// chunk is what the translator reads of one chat.completion.chunk: its
// choices and its usage, decoded by the SDK's own types inside the SDK's
// stream reader (ssestream.Stream, which also frames the server-sent
// events, stops at [DONE] and turns an error object into a
// StreamError).
//
// The SDK's ChatCompletionChunk also decodes, and keeps the raw JSON of,
// every other field of every chunk (id, object, created, model,
// service_tier, system_fingerprint, obfuscation): about half of the
// decode's allocations, for fields metis never reads (see
// docs/benchmarks.md). A chunk the smaller decode refuses (a field of an
// unexpected JSON type) is decoded in full, so every chunk reads as the
// SDK's own decode reads it.
type chunk struct {
	Choices []sdk.ChatCompletionChunkChoice `json:"choices"`
	Usage   *sdk.CompletionUsage            `json:"usage"` // nil when absent or null
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *chunk) UnmarshalJSON(data []byte) error {
	type small chunk // without this method
	if err := json.Unmarshal(data, (*small)(c)); err == nil {
		return nil
	}
	var full sdk.ChatCompletionChunk
	if err := full.UnmarshalJSON(data); err != nil {
		return err
	}
	*c = fromFull(&full)
	return nil
}

// fromFull is the chunk of a chunk the SDK decoded in full.
func fromFull(full *sdk.ChatCompletionChunk) chunk {
	c := chunk{Choices: full.Choices}
	if full.JSON.Usage.Valid() {
		u := full.Usage
		c.Usage = &u
	}
	return c
}
