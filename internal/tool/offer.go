package tool

import (
	"fmt"
	"strings"

	"github.com/metis-agent/metis/internal/model"
)

// EditTools is the edit-tools setting: which of the two ways of editing
// a file (edit_file's string replacement, apply_patch's patches) the
// models are offered. Models are trained on one of them: OpenAI's on
// Codex's apply_patch, Anthropic's on string replacement; offering one
// keeps the tool list short and the model on familiar ground.
type EditTools string

// Values of the edit-tools setting.
const (
	// EditToolsAuto offers apply_patch to OpenAI-family models and
	// edit_file to every other model; builtin:demo gets every tool.
	EditToolsAuto EditTools = "auto"
	// EditToolsBoth offers both to every model.
	EditToolsBoth EditTools = "both"
	// EditToolsEditFile and EditToolsApplyPatch offer only that one.
	EditToolsEditFile   EditTools = "edit_file"
	EditToolsApplyPatch EditTools = "apply_patch"
)

// ParseEditTools reads the setting ("" is auto).
func ParseEditTools(s string) (EditTools, error) {
	switch e := EditTools(strings.TrimSpace(s)); e {
	case "":
		return EditToolsAuto, nil
	case EditToolsAuto, EditToolsBoth, EditToolsEditFile, EditToolsApplyPatch:
		return e, nil
	}
	return "", fmt.Errorf("%q is not one of auto, both, edit_file, apply_patch", s)
}

// Offers reports whether the tool named name is offered to the model
// modelID ("provider:model"). Only edit_file and apply_patch are ever
// held back.
func (e EditTools) Offers(modelID, name string) bool {
	if name != "edit_file" && name != "apply_patch" {
		return true
	}
	switch e {
	case EditToolsBoth:
		return true
	case EditToolsEditFile, EditToolsApplyPatch:
		return name == string(e)
	}
	switch modelFamily(modelID) {
	case "all":
		return true
	case "openai":
		return name == "apply_patch"
	}
	return name == "edit_file"
}

// modelFamily tells the family of a model by its provider and name:
// "openai" for OpenAI's own models (GPT, the o-series, Codex), "all" for
// builtin:demo (offered every tool, so each can be driven from a
// prompt), "other" for the rest: Anthropic's and every other model
// served through an OpenAI-compatible endpoint.
func modelFamily(modelID string) string {
	provider, name, err := model.SplitID(modelID)
	if err != nil {
		return "other"
	}
	name = strings.ToLower(name)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:] // "openai/gpt-5" on a router
	}
	switch {
	case provider == "builtin":
		return "all"
	case strings.Contains(name, "claude"):
		return "other"
	case strings.HasPrefix(name, "gpt-"), strings.HasPrefix(name, "chatgpt"), strings.Contains(name, "codex"),
		len(name) >= 2 && name[0] == 'o' && name[1] >= '1' && name[1] <= '9':
		return "openai"
	}
	return "other"
}
