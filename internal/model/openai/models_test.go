package openai

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/model"
)

// TestModelsListsTheServersModels: GET /v1/models (Ollama's answer
// shape) gives the ids in order; an error status is a classified
// *model.Error; an empty list is an error.
func TestModelsListsTheServersModels(t *testing.T) {
	fs := newServer(t,
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"object":"list","data":[{"id":"llama3.2:latest","object":"model","created":1730000000,"owned_by":"library"},{"id":"qwen2.5-coder:7b","object":"model","created":1720000000,"owned_by":"library"}]}`))
		},
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`))
		},
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"object":"list","data":[]}`))
		},
	)
	a := fs.adapter(t, func(o *Options) { o.APIKey = "" })
	ctx := context.Background()
	got, err := a.Models(ctx)
	if err != nil || !slices.Equal(got, []string{"llama3.2:latest", "qwen2.5-coder:7b"}) {
		t.Fatalf("Models = %v, %v", got, err)
	}
	if fs.paths[0] != "/v1/models" {
		t.Fatalf("path %q", fs.paths[0])
	}
	_, err = a.Models(ctx)
	var me *model.Error
	if !errors.As(err, &me) || me.Class != model.ClassAuth {
		t.Fatalf("401: %v", err)
	}
	if _, err := a.Models(ctx); err == nil {
		t.Fatal("an empty list is not an error")
	}
}
