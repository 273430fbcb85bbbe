package tool_test

import (
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// TestEditToolsOffers: by default OpenAI-family models get apply_patch,
// the others edit_file, builtin:demo both; the setting overrides; other
// tools are always offered.
func TestEditToolsOffers(t *testing.T) {
	for _, c := range []struct {
		setting tool.EditTools
		model   string
		want    string // the edit tools offered
	}{
		{tool.EditToolsAuto, "openai:gpt-5", "apply_patch"},
		{tool.EditToolsAuto, "openai:o3-mini", "apply_patch"},
		{tool.EditToolsAuto, "openai:gpt-5-codex", "apply_patch"},
		{tool.EditToolsAuto, "openai:openai/gpt-4.1", "apply_patch"},
		{tool.EditToolsAuto, "anthropic:claude-sonnet-4-5", "edit_file"},
		{tool.EditToolsAuto, "openai:anthropic/claude-3.7-sonnet", "edit_file"},
		{tool.EditToolsAuto, "openai:qwen2.5-coder:32b", "edit_file"},
		{tool.EditToolsAuto, "openai:llama3", "edit_file"},
		{tool.EditToolsAuto, "builtin:demo", "apply_patch,edit_file"},
		{"", "openai:gpt-5", "apply_patch"},
		{tool.EditToolsBoth, "anthropic:claude-opus-4", "apply_patch,edit_file"},
		{tool.EditToolsEditFile, "openai:gpt-5", "edit_file"},
		{tool.EditToolsApplyPatch, "anthropic:claude-opus-4", "apply_patch"},
		{tool.EditToolsApplyPatch, "builtin:demo", "apply_patch"},
	} {
		r := tool.NewRegistry(tool.Builtins()...)
		r.SetOffer(c.setting.Offers)
		var edits []string
		n := 0
		for _, s := range r.SpecsFor(c.model) {
			n++
			if s.Name == "edit_file" || s.Name == "apply_patch" {
				edits = append(edits, s.Name)
			}
		}
		if got := strings.Join(edits, ","); got != c.want {
			t.Errorf("%s %s: offered %s, want %s", c.setting, c.model, got, c.want)
		}
		if want := len(tool.Builtins()) - 2 + len(edits); n != want {
			t.Errorf("%s %s: %d tools offered, want %d", c.setting, c.model, n, want)
		}
	}
	// Without a policy every tool is offered.
	if r := tool.NewRegistry(tool.Builtins()...); len(r.SpecsFor("openai:gpt-5")) != len(tool.Builtins()) {
		t.Error("no policy: not every tool")
	}
}

func TestParseEditTools(t *testing.T) {
	for in, want := range map[string]tool.EditTools{"": tool.EditToolsAuto, "auto": tool.EditToolsAuto, " both ": tool.EditToolsBoth,
		"edit_file": tool.EditToolsEditFile, "apply_patch": tool.EditToolsApplyPatch} {
		if got, err := tool.ParseEditTools(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := tool.ParseEditTools("patch"); err == nil {
		t.Error("patch accepted")
	}
}

// TestFileChangingToolsPreviewAndAreEdits: the tools that change files
// can show their diff before they run, and are of kind edit; the
// searches are reads.
func TestFileChangingToolsPreviewAndAreEdits(t *testing.T) {
	for _, tl := range []tool.Tool{tool.WriteFile{}, tool.EditFile{}, tool.ApplyPatch{}} {
		if _, ok := tl.(tool.Previewer); !ok {
			t.Errorf("%s cannot preview", tl.Spec().Name)
		}
		if _, ok := tl.(tool.Targeted); !ok && tl.Spec().Name != "write_file" {
			t.Errorf("%s has no targets", tl.Spec().Name)
		}
		if tool.KindOf(tl) != tool.KindEdit && tl.Spec().Name != "write_file" {
			t.Errorf("%s is not an edit", tl.Spec().Name)
		}
	}
}
