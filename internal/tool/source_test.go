package tool_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/tool"
)

// named is a tool that only has a name.
type named string

func (n named) Spec() model.ToolSpec {
	return model.ToolSpec{Name: string(n), InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (n named) Run(context.Context, tool.Env, json.RawMessage) (tool.Result, error) {
	return tool.Result{Content: string(n)}, nil
}

// source offers each session the tools set for it.
type source struct {
	mu    sync.Mutex
	tools map[string][]tool.Tool
	asked []string
}

func (s *source) Tools(_ context.Context, session string) []tool.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, session)
	return s.tools[session]
}

func (s *source) set(session string, tools ...tool.Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools[session] = tools
}

func specNames(specs []model.ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

func TestRegistryForSessionOffersTheSourcesToolsOfTheLastList(t *testing.T) {
	base := tool.NewRegistry(named("read_file"), named("shell"))
	src := &source{tools: map[string][]tool.Tool{}}
	src.set("s1", named("mcp__a__x"), named("shell")) // a source never shadows the registry's own
	src.set("s2", named("mcp__b__y"))
	r := base.ForSession(context.Background(), "s1", src)
	if _, ok := r.Get("mcp__a__x"); ok {
		t.Fatal("Get found a source's tool before any list was offered")
	}
	if got := specNames(r.Specs()); len(got) != 3 || got[0] != "mcp__a__x" || got[1] != "read_file" || got[2] != "shell" {
		t.Fatalf("specs: %v", got)
	}
	if tl, ok := r.Get("shell"); !ok || tl != tool.Tool(named("shell")) {
		t.Fatal("the registry's shell is not the one found")
	}
	if _, ok := r.Get("mcp__a__x"); !ok {
		t.Fatal("the offered tool is not found")
	}
	if _, ok := r.Get("mcp__b__y"); ok {
		t.Fatal("another session's tool is found")
	}
	// The source changes: the next list follows, and Get with it.
	src.set("s1", named("mcp__a__z"))
	if got := specNames(r.Specs()); len(got) != 3 || got[0] != "mcp__a__z" {
		t.Fatalf("specs after a change: %v", got)
	}
	if _, ok := r.Get("mcp__a__x"); ok {
		t.Fatal("a tool no longer offered is found")
	}
	if got := specNames(base.Specs()); len(got) != 2 {
		t.Fatalf("the base registry changed: %v", got)
	}
	// The base's offer policy applies to the turn's registry.
	base.SetOffer(func(_, name string) bool { return name != "shell" })
	r = base.ForSession(context.Background(), "s1", src)
	if got := specNames(r.SpecsFor("any:model")); len(got) != 2 || got[0] != "mcp__a__z" || got[1] != "read_file" {
		t.Fatalf("specs offered: %v", got)
	}
	if base.ForSession(context.Background(), "s1", nil) != base {
		t.Fatal("no source: not the registry itself")
	}
}
