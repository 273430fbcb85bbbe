package config

import (
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// TestToolSettings: edit-tools and web-fetch-allow-private from the
// file and the flags, their defaults, and refusals of bad values.
func TestToolSettings(t *testing.T) {
	dir := t.TempDir()
	c, err := Load([]string{"--home", dir})
	if err != nil || c.EditTools != tool.EditToolsAuto || c.WebFetchAllowPrivate {
		t.Fatalf("defaults: %v %v %v", c.EditTools, c.WebFetchAllowPrivate, err)
	}
	writeConfig(t, dir, "edit_tools: apply_patch\nweb-fetch-allow-private: maybe\n")
	if _, err := Load([]string{"--home", dir}); err == nil || !strings.Contains(err.Error(), "true or false") {
		t.Errorf("maybe: %v", err)
	}
	writeConfig(t, dir, "edit_tools: apply_patch\nweb-fetch-allow-private: true\n")
	c, err = Load([]string{"--home", dir})
	if err != nil || c.EditTools != tool.EditToolsApplyPatch || !c.WebFetchAllowPrivate {
		t.Fatalf("file: %v %v %v", c.EditTools, c.WebFetchAllowPrivate, err)
	}
	if _, err := Load([]string{"--home", dir, "--edit-tools=patch"}); err == nil || !strings.Contains(err.Error(), "auto, both, edit_file, apply_patch") {
		t.Errorf("bad edit-tools: %v", err)
	}
}
