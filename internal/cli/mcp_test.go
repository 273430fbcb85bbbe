package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

func TestMCPList(t *testing.T) {
	home := t.TempDir()
	cfg := "mcp_servers:\n  broken: {command: x, url: \"http://h/\"}\n  off: {command: x, enabled: false}\n  later: {command: /bin/true}\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h := servertest.Start(t, home)
	var out, errOut bytes.Buffer
	if code := cli.MCP(context.Background(), []string{"list", "--server", h.URL}, cli.Env{Stdout: &out, Stderr: &errOut}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, want := range [][]string{{"broken", "config", "invalid", "not both"}, {"later", "config", "stdio", "idle"}, {"off", "disabled"}} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("line %q lacks %q", lines[i+1], w)
			}
		}
	}
	out.Reset()
	if code := cli.MCP(context.Background(), []string{"list", "--json", "--server", h.URL}, cli.Env{Stdout: &out, Stderr: &errOut}); code != 0 {
		t.Fatalf("--json exit %d", code)
	}
	var st protocol.MCPStatus
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || len(st.Servers) != 3 {
		t.Fatalf("--json: %v %s", err, out.String())
	}
	if code := cli.MCP(context.Background(), []string{"lst"}, cli.Env{Stdout: &out, Stderr: &errOut}); code != 2 || !strings.Contains(errOut.String(), "usage: metis mcp list") {
		t.Fatalf("usage: %d %q", code, errOut.String())
	}
}

func TestMCPListTools(t *testing.T) {
	var out bytes.Buffer
	cli.PrintMCPForTest(&out, protocol.MCPStatus{Servers: []protocol.MCPServerStatus{{Name: "fs", Scope: "config", Transport: "stdio", State: "running",
		PID: 42, Tools: []protocol.MCPToolStatus{
			{Name: "mcp__fs__read", Tool: "read", Kind: "read", Description: "Reads\tfiles"},
			{Tool: "bad", Skipped: true, Problem: "the input schema's type is \"string\""},
		}}}}, true)
	s := out.String()
	for _, want := range []string{"fs  ", "1 (+1 skipped)", "42", "mcp__fs__read", "Reads files", "(bad not offered)", `type is "string"`} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}
