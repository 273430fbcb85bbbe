package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
)

// TestToolsGetNoCredentials: a server started with provider keys,
// METIS_TOKEN and other secrets in its environment runs `env` through
// the shell tool; none of them is in what the tool printed, so none is
// in the trace, while the allow-list and tool-env's additions are.
func TestToolsGetNoCredentials(t *testing.T) {
	secrets := map[string]string{
		"ANTHROPIC_API_KEY": "sk-ant-leak-1", "OPENAI_API_KEY": "sk-oai-leak-2", "OPENAI_BASE_URL": "http://leak-3.invalid",
		"METIS_TOKEN": "metis-leak-4", "GITHUB_TOKEN": "gh-leak-5", "AWS_SECRET_ACCESS_KEY": "aws-leak-6", "UNLISTED": "leak-7",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("EXTRA_SETTING", "extra-value")
	h := servertest.Start(t, "", func(c *config.Config) {
		c.DefaultModel = "builtin:demo"
		c.ToolEnv = []string{"EXTRA_SETTING", "OPENAI_API_KEY"} // the key must still be refused
	})
	sid := h.CreateSession()
	h.Submit(sid, `/tool shell {"command": "env"}`)
	h.WaitTurn(sid)

	evs, err := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}})
	servertest.Must(t, err)
	var trace strings.Builder
	for _, ev := range evs {
		trace.Write(ev.Payload)
	}
	var page struct {
		Messages []struct {
			Content []struct {
				Content string `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	h.Do("GET", "/sessions/"+sid+"/messages", nil, &page)
	for _, m := range page.Messages {
		for _, b := range m.Content {
			trace.WriteString(b.Content)
		}
	}
	got := trace.String()
	for k, v := range secrets {
		if strings.Contains(got, v) || strings.Contains(got, k+"=") {
			t.Errorf("%s reached the tool's output", k)
		}
	}
	for _, want := range []string{"EXTRA_SETTING=extra-value", "PATH="} {
		if !strings.Contains(got, want) {
			t.Errorf("%s missing from the tool's environment; trace:\n%s", want, got)
		}
	}
}
