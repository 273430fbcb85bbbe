package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
)

// maxListedModels bounds how many model ids Models returns.
const maxListedModels = 1000

// Models lists the model names the server offers (GET BaseURL/models),
// in the server's order: for a local server (Ollama, vLLM, llama.cpp)
// these are the models it has loaded or pulled. A failure is a
// *model.Error saying what to check.
func (a *Adapter) Models(ctx context.Context) ([]string, error) {
	page, err := a.models.List(ctx)
	if err != nil {
		return nil, a.classifyErr(err, "")
	}
	var out []string
	for _, m := range page.Data {
		if m.ID != "" && len(out) < maxListedModels {
			out = append(out, m.ID)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no models", a.endpoint)
	}
	return out, nil
}

// ContextWindows returns the context window of each model the server
// lists where it says (GET BaseURL/models): OpenRouter and LM Studio
// put it in context_length, vLLM in max_model_len; others (Ollama,
// OpenAI itself) say nothing, and the map is then empty. It implements
// model.WindowLister.
func (a *Adapter) ContextWindows(ctx context.Context) (map[string]int, error) {
	page, err := a.models.List(ctx)
	if err != nil {
		return nil, a.classifyErr(err, "")
	}
	out := map[string]int{}
	for _, m := range page.Data {
		if m.ID == "" || len(out) >= maxListedModels {
			continue
		}
		if n := windowOf([]byte(m.RawJSON())); n > 0 {
			out[m.ID] = n
		}
	}
	return out, nil
}

// windowOf reads a listed model's context window from its JSON object.
func windowOf(raw []byte) int {
	var f struct {
		ContextLength    json.Number `json:"context_length"`
		MaxModelLen      json.Number `json:"max_model_len"`
		ContextWindow    json.Number `json:"context_window"`
		MaxContextLength json.Number `json:"max_context_length"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return 0
	}
	for _, v := range []json.Number{f.ContextLength, f.MaxModelLen, f.ContextWindow, f.MaxContextLength} {
		if n, err := v.Int64(); err == nil && n > 0 && n <= math.MaxInt32 {
			return int(n)
		}
	}
	return 0
}
