package mcp_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/mcp"
	"github.com/metis-agent/metis/protocol"
)

func TestReloadKeepsChangesAndRemovesServers(t *testing.T) {
	m, path := newManager(t, faultEntry(t, "a", "tools"))
	toolsOf(t, m, "s1")
	pidA := serverStatus(t, m, "a").PID

	writeConfig(t, path, faultEntry(t, "a", "tools"), faultEntry(t, "b", "tools"))
	m.Reload(ctxT(t, 30*time.Second))
	if st := serverStatus(t, m, "b"); st.State != protocol.MCPStateIdle {
		t.Fatalf("a new entry is %s before a turn needs it", st.State)
	}
	tools := toolsOf(t, m, "s1")
	mustTool(t, tools, "mcp__b__echo")
	if st := serverStatus(t, m, "a"); st.PID != pidA {
		t.Fatalf("an unchanged entry was restarted: pid %d, was %d", st.PID, pidA)
	}
	pidB := serverStatus(t, m, "b").PID

	writeConfig(t, path, faultEntry(t, "a", "tools", "call_timeout: 1m"), faultEntry(t, "b", "tools"))
	m.Reload(ctxT(t, 30*time.Second))
	if st := serverStatus(t, m, "a"); st.State != protocol.MCPStateIdle {
		t.Fatalf("a changed entry is %s", st.State)
	}
	waitGone(t, "the server of a changed entry", pidA)
	if st := serverStatus(t, m, "b"); st.PID != pidB {
		t.Fatalf("b was restarted when a changed")
	}

	writeConfig(t, path, faultEntry(t, "a", "tools", "call_timeout: 1m"))
	m.Reload(ctxT(t, 30*time.Second))
	waitGone(t, "the server of a removed entry", pidB)
	for _, s := range m.Status().Servers {
		if s.Name == "b" {
			t.Fatalf("a removed entry is still reported: %+v", s)
		}
	}
	if _, ok := toolsOf(t, m, "s1")["mcp__b__echo"]; ok {
		t.Fatal("a removed server's tools are still offered")
	}
}

func TestBadEntriesAreReportedByNameAndTheOthersRun(t *testing.T) {
	m, _ := newManager(t,
		faultEntry(t, "good", "tools"),
		"  both:\n    command: x\n    url: http://127.0.0.1:1/\n",
		"  \"bad name!\":\n    command: x\n",
		"  nokey:\n    url: http://127.0.0.1:1/mcp\n    headers: {Authorization: \"Bearer ${METIS_TEST_UNSET_VARIABLE}\"}\n",
		"  typo:\n    comand: x\n",
		faultEntry(t, "off", "tools", "enabled: false"),
	)
	tools := toolsOf(t, m, "s1")
	mustTool(t, tools, "mcp__good__echo")
	for n := range tools {
		if !strings.HasPrefix(n, "mcp__good__") {
			t.Errorf("offered %s", n)
		}
	}
	for name, want := range map[string]string{
		"both":      "not both",
		"bad name!": "letters, digits",
		"nokey":     "METIS_TEST_UNSET_VARIABLE, which is not set",
		"typo":      "comand",
	} {
		st := serverStatus(t, m, name)
		if st.State != protocol.MCPStateInvalid || !strings.Contains(st.LastError, want) {
			t.Errorf("%s: state %s, last error %q, want it to say %q", name, st.State, st.LastError, want)
		}
	}
	if st := serverStatus(t, m, "off"); st.State != protocol.MCPStateDisabled || st.PID != 0 {
		t.Errorf("a disabled server: %+v", st)
	}
}

func TestAConfigThatDoesNotParseKeepsTheServers(t *testing.T) {
	m, path := newManager(t, faultEntry(t, "a", "tools"))
	toolsOf(t, m, "s1")
	pid := serverStatus(t, m, "a").PID
	if err := os.WriteFile(path, []byte("mcp_servers: [unclosed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.Reload(ctxT(t, 10*time.Second))
	st := m.Status()
	if !strings.Contains(st.ConfigError, "does not parse") {
		t.Fatalf("config error: %q", st.ConfigError)
	}
	if a := serverStatus(t, m, "a"); a.PID != pid || a.State != protocol.MCPStateRunning {
		t.Fatalf("a config that does not parse changed the servers: %+v", a)
	}
	writeConfig(t, path, "  a:\n    command: 7\n    url: 8\n")
	m.Reload(ctxT(t, 10*time.Second))
	if st := m.Status(); st.ConfigError != "" {
		t.Fatalf("config error after a fix: %q", st.ConfigError)
	}
}

func TestWatchAppliesAChangedFile(t *testing.T) {
	m, path := newManager(t, faultEntry(t, "a", "tools"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Watch(ctx, 20*time.Millisecond)
	}()
	defer func() { cancel(); <-done }()
	writeConfig(t, path, faultEntry(t, "a", "tools"), faultEntry(t, "later", "tools"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		found := false
		for _, s := range m.Status().Servers {
			found = found || s.Name == "later"
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher never applied the new entry")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sessionServer(t *testing.T, name, mode string) protocol.MCPServerConfig {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return protocol.MCPServerConfig{Name: name, Command: exe, Env: map[string]string{"MCPTEST_SERVER": mode}}
}

func TestSessionServersServeTheirSessionsOnly(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "shared", "tools"))
	ws := t.TempDir()
	editor := sessionServer(t, "Editor Tools", "tools")
	st, err := m.SetSessionServers(ctxT(t, 10*time.Second), "s1", ws, []protocol.MCPServerConfig{editor})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 2 || st.Servers[0].Name != "Editor_Tools" || st.Servers[0].Scope != protocol.MCPScopeSession {
		t.Fatalf("the session's view: %+v", st.Servers)
	}
	mustTool(t, toolsOf(t, m, "s1"), "mcp__Editor_Tools__echo")
	mustTool(t, toolsOf(t, m, "s1"), "mcp__shared__echo")
	if _, ok := toolsOf(t, m, "s2")["mcp__Editor_Tools__echo"]; ok {
		t.Fatal("another session sees a session's server")
	}
	// The same server for a second session: one process.
	if _, err := m.SetSessionServers(ctxT(t, 10*time.Second), "s2", ws, []protocol.MCPServerConfig{editor}); err != nil {
		t.Fatal(err)
	}
	mustTool(t, toolsOf(t, m, "s2"), "mcp__Editor_Tools__echo")
	var editors []protocol.MCPServerStatus
	for _, s := range m.Status().Servers {
		if s.Name == "Editor_Tools" {
			editors = append(editors, s)
		}
	}
	if len(editors) != 1 || strings.Join(editors[0].SessionIDs, ",") != "s1,s2" {
		t.Fatalf("session servers: %+v", editors)
	}
	pid := editors[0].PID
	// Cleared for one session, it serves the other; cleared for both,
	// it stops.
	if _, err := m.SetSessionServers(ctxT(t, 10*time.Second), "s1", ws, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := toolsOf(t, m, "s1")["mcp__Editor_Tools__echo"]; ok {
		t.Fatal("a cleared session still has the server")
	}
	mustTool(t, toolsOf(t, m, "s2"), "mcp__Editor_Tools__echo")
	if _, err := m.SetSessionServers(ctxT(t, 30*time.Second), "s2", ws, []protocol.MCPServerConfig{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "a session server no session uses", pid)
	for _, s := range m.Status().Servers {
		if s.Scope == protocol.MCPScopeSession {
			t.Fatalf("still reported: %+v", s)
		}
	}
}

func TestSessionServerTakesThePlaceOfAConfiguredOne(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "fs", "tools"))
	if _, err := m.SetSessionServers(ctxT(t, 10*time.Second), "s1", t.TempDir(),
		[]protocol.MCPServerConfig{sessionServer(t, "fs", "badschema")}); err != nil {
		t.Fatal(err)
	}
	mustTool(t, toolsOf(t, m, "s1"), "mcp__fs__no_type")      // the session's
	if _, ok := toolsOf(t, m, "s2")["mcp__fs__no_type"]; ok { // others keep config.yaml's
		t.Fatal("another session got the session's server")
	}
}

func TestSessionServersAreChecked(t *testing.T) {
	m, _ := newManager(t)
	for _, bad := range [][]protocol.MCPServerConfig{
		{{Name: "x"}},
		{{Name: "x", Command: "a", URL: "http://h/"}},
		{{Name: "x", URL: "ftp://h/"}},
		{{Name: "x", URL: "http://h/", Headers: map[string]string{"Mcp-Session-Id": "forged"}}},
		{{Name: "x", Command: "a", Cwd: "relative"}},
		{{Name: "x", Command: "a", Env: map[string]string{"BAD NAME": "v"}}},
	} {
		if _, err := m.SetSessionServers(ctxT(t, 10*time.Second), "s1", "/ws", bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
	if len(m.Status().Servers) != 0 {
		t.Fatal("a refused set left servers behind")
	}
}

func TestWorkersUseTheirPlannersSessionServers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	m := mcp.New(mcp.Options{ConfigPath: path, Logger: testLog(t), Parent: func(_ context.Context, id string) string {
		if id == "worker" {
			return "planner"
		}
		return ""
	}})
	defer func() { _ = m.Close(ctxT(t, 30*time.Second)) }()
	if _, err := m.SetSessionServers(ctxT(t, 10*time.Second), "planner", dir, []protocol.MCPServerConfig{sessionServer(t, "ed", "tools")}); err != nil {
		t.Fatal(err)
	}
	mustTool(t, toolsOf(t, m, "worker"), "mcp__ed__echo")
	if _, ok := toolsOf(t, m, "stranger")["mcp__ed__echo"]; ok {
		t.Fatal("an unrelated session got the planner's server")
	}
}

func TestHundredSessionsShareOneServer(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "fault", "tools"))
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for n := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("session-%d", n)
			tools := m.Tools(ctxT(t, 60*time.Second), sid)
			for _, tl := range tools {
				if tl.Spec().Name == "mcp__fault__echo" {
					res, err := call(t, ctxT(t, 60*time.Second), tl, fmt.Sprintf(`{"text": %q}`, sid))
					if err != nil || res.Content != "echo: "+sid {
						errs <- fmt.Errorf("%s: %q, %v", sid, res.Content, err)
					}
					return
				}
			}
			errs <- fmt.Errorf("%s: no echo tool among %d", sid, len(tools))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := serverStatus(t, m, "fault"); st.Restarts != 0 || st.State != protocol.MCPStateRunning {
		t.Fatalf("after 100 sessions: %+v", st)
	}
}

func TestCancelWhileAServerStarts(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "silent", "noinit", "start_timeout: 1m"))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	if tools := m.Tools(ctx, "s1"); len(tools) != 0 {
		t.Fatalf("tools: %d", len(tools))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the tool list outlived its turn's cancel by %s", took)
	}
	// Already cancelled: no wait at all.
	start = time.Now()
	m.Tools(ctx, "s2")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a cancelled turn waited %s", took)
	}
}

func TestCallWhileTheServerIsDownFailsAtOnce(t *testing.T) {
	m, path := newManager(t, faultEntry(t, "a", "tools"))
	tools := toolsOf(t, m, "s1")
	echo := mustTool(t, tools, "mcp__a__echo")
	writeConfig(t, path)
	m.Reload(ctxT(t, 30*time.Second)) // removed: stopped
	_, err := call(t, ctxT(t, 10*time.Second), echo, `{"text": "x"}`)
	if classOf(err) != "unavailable" || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("a call to a stopped server: %v", err)
	}
}

func TestCloseStopsACallInFlight(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "a", "tools"))
	tools := toolsOf(t, m, "s1")
	done := make(chan error, 1)
	go func() {
		_, err := call(t, context.Background(), tools["mcp__a__hang"], `{}`)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := m.Close(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if classOf(err) != "unavailable" || !strings.Contains(err.Error(), "stopped") {
			t.Fatalf("a call when its server stopped: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call outlived its server")
	}
}
