package config

import (
	"testing"
	"time"
)

// config.yaml's mcp_servers is internal/mcp's to read: even a bad
// entry, or a section of the wrong shape, never refuses the start.
func TestMCPServersNeverRefuseTheStart(t *testing.T) {
	for _, section := range []string{
		"mcp_servers:\n  fs: {command: npx, args: [-y, x]}\n  bad: {command: x, url: y}\n",
		"mcp-servers: 5\n",
		"mcp_servers:\n",
	} {
		dir := t.TempDir()
		writeConfig(t, dir, section+"mcp-poll: 250ms\n")
		c, err := Load([]string{"--home", dir})
		if err != nil {
			t.Errorf("%q: %v", section, err)
			continue
		}
		if c.MCPPoll != 250*time.Millisecond {
			t.Errorf("mcp-poll: %v", c.MCPPoll)
		}
	}
	if Defaults().MCPPoll != time.Second {
		t.Errorf("default mcp-poll: %v", Defaults().MCPPoll)
	}
}
