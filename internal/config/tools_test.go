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

// TestBackgroundSettings: background-commands and background-output,
// their careful defaults, 0 turning background commands off, and the
// refusal of a buffer too small to be useful.
func TestBackgroundSettings(t *testing.T) {
	dir := t.TempDir()
	c, err := Load([]string{"--home", dir})
	if err != nil || c.BackgroundCommands != tool.DefaultBackgroundCommands || c.BackgroundOutput != tool.DefaultBackgroundOutput {
		t.Fatalf("defaults: %d %d %v", c.BackgroundCommands, c.BackgroundOutput, err)
	}
	writeConfig(t, dir, "background_commands: 0\nbackground-output: 65536\n")
	if c, err = Load([]string{"--home", dir}); err != nil || c.BackgroundCommands != 0 || c.BackgroundOutput != 65536 {
		t.Fatalf("file: %d %d %v", c.BackgroundCommands, c.BackgroundOutput, err)
	}
	for _, bad := range []string{"--background-commands=-1", "--background-output=100"} {
		if _, err := Load([]string{"--home", dir, bad}); err == nil || !strings.Contains(err.Error(), "at least") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
