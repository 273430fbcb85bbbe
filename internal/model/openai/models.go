package openai

import (
	"context"
	"fmt"
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
