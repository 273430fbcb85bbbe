package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/mcp"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(serverEnv); mode != "" {
		runTestServer(mode)
	}
	goleak.VerifyTestMain(m)
}

// repoRoot is the repository's root (where go.mod is).
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// npmServer returns the entry point of an npm reference server, or
// skips the test when node_modules does not have it.
func npmServer(t testing.TB, pkg string) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("node_modules has no @modelcontextprotocol/%s (run npm ci in the repository root): %v", pkg, err)
	}
	return p
}

// faultEntry is the config.yaml entry of the fault server (this test
// binary) in the given mode, with extra lines (indented as entry keys).
func faultEntry(t testing.TB, name, mode string, extra ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := fmt.Sprintf("  %s:\n    command: %q\n    env: {%s: %s}\n", name, exe, serverEnv, mode)
	for _, x := range extra {
		e += "    " + x + "\n"
	}
	return e
}

// everythingEntry is the entry of server-everything over stdio.
func everythingEntry(t testing.TB, name string, extra ...string) string {
	t.Helper()
	e := fmt.Sprintf("  %s:\n    command: node\n    args: [%q, stdio]\n", name, npmServer(t, "server-everything"))
	for _, x := range extra {
		e += "    " + x + "\n"
	}
	return e
}

// testLog is a logger for the managers of tests: quiet unless -v.
func testLog(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newManager writes config.yaml with the entries under mcp_servers and
// returns a manager of it, closed when the test ends.
func newManager(t testing.TB, entries ...string) (*mcp.Manager, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	writeConfig(t, path, entries...)
	m := mcp.New(mcp.Options{ConfigPath: path, Logger: testLog(t)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m, path
}

func writeConfig(t testing.TB, path string, entries ...string) {
	t.Helper()
	body := "mcp_servers:\n" + strings.Join(entries, "")
	if len(entries) == 0 {
		body = ""
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ctxT is a context bounded for one step of a test.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// toolsOf returns the session's tools by offered name.
func toolsOf(t testing.TB, m *mcp.Manager, session string) map[string]tool.Tool {
	t.Helper()
	out := map[string]tool.Tool{}
	for _, tl := range m.Tools(ctxT(t, 60*time.Second), session) {
		out[tl.Spec().Name] = tl
	}
	return out
}

func names(tools map[string]tool.Tool) []string {
	var out []string
	for n := range tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// call runs a tool as the dispatcher would.
func call(t testing.TB, ctx context.Context, tl tool.Tool, input string) (tool.Result, error) {
	t.Helper()
	return tl.Run(ctx, tool.Env{SessionID: "s"}, json.RawMessage(input))
}

// mustTool returns the tool of that name or fails.
func mustTool(t testing.TB, tools map[string]tool.Tool, name string) tool.Tool {
	t.Helper()
	tl, ok := tools[name]
	if !ok {
		t.Fatalf("no tool %s among %v", name, names(tools))
	}
	return tl
}

// serverStatus returns the status of the server of that name.
func serverStatus(t testing.TB, m *mcp.Manager, name string) protocol.MCPServerStatus {
	t.Helper()
	for _, s := range m.Status().Servers {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no server %s in the status", name)
	return protocol.MCPServerStatus{}
}

// waitState waits until the server is in one of the states.
func waitState(t testing.TB, m *mcp.Manager, name string, states ...string) protocol.MCPServerStatus {
	t.Helper()
	return waitStatus(t, m, name, func(s protocol.MCPServerStatus) bool {
		for _, st := range states {
			if s.State == st {
				return true
			}
		}
		return false
	})
}

// waitStatus waits until the server's status satisfies ok.
func waitStatus(t testing.TB, m *mcp.Manager, name string, ok func(protocol.MCPServerStatus) bool) protocol.MCPServerStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, ch := m.Version()
		s := serverStatus(t, m, name)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s never reached the state wanted: %+v", name, s)
		}
		select {
		case <-ch:
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// classOf is the class of a tool error.
func classOf(err error) string { return tool.ClassOf(err) }

// out is a result's output beyond its text (empty when none).
func out(res tool.Result) tool.Output {
	if res.Output == nil {
		return tool.Output{}
	}
	return *res.Output
}

// rawArgs is a JSON object as CallToolParams' arguments.
func rawArgs(s string) json.RawMessage { return json.RawMessage(s) }
