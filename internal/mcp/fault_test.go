package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/mcp"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// Fault cases, with the fault server of testserver_test.go.

func TestCrashMidCallFailsUnavailableAndTheServerRestarts(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "fault", "tools"))
	tools := toolsOf(t, m, "s1")
	first := serverStatus(t, m, "fault").PID
	_, err := call(t, ctxT(t, 30*time.Second), mustTool(t, tools, "mcp__fault__crash"), `{}`)
	if classOf(err) != tool.ClassUnavailable {
		t.Fatalf("a crash mid-call: class %s (%v), want %s", classOf(err), err, tool.ClassUnavailable)
	}
	for _, want := range []string{"exited with status 3", "crashing now"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	st := waitStatus(t, m, "fault", func(s protocol.MCPServerStatus) bool {
		return s.State == protocol.MCPStateRunning && s.PID != first
	})
	if st.Restarts < 1 || !strings.Contains(st.LastError, "exited with status 3") {
		t.Fatalf("after the crash: %+v (first pid %d)", st, first)
	}
	tools = toolsOf(t, m, "s1")
	res, err := call(t, ctxT(t, 30*time.Second), mustTool(t, tools, "mcp__fault__echo"), `{"text": "again"}`)
	if err != nil || res.Content != "echo: again" {
		t.Fatalf("after the restart: %q, %v", res.Content, err)
	}
}

func TestCancelledCallSendsCancellationAndStopsWaiting(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "fault", "tools"))
	tools := toolsOf(t, m, "s1")
	marker := filepath.Join(t.TempDir(), "cancelled")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := call(t, ctx, tools["mcp__fault__hang"], `{"marker": "`+marker+`"}`)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // the call is under way
	cancel()
	select {
	case err := <-done:
		if classOf(err) != tool.ClassCancelled {
			t.Fatalf("cancelled call: class %s (%v)", classOf(err), err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	waitFile(t, marker, "cancelled")
	if st := serverStatus(t, m, "fault"); st.State != protocol.MCPStateRunning || st.Restarts != 0 {
		t.Fatalf("a cancelled call changed the server: %+v", st)
	}
}

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q (the server never saw notifications/cancelled): %q, %v", path, want, b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHangingCallTimesOutAtTheCallTimeout(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "fault", "tools", "call_timeout: 300ms"))
	tools := toolsOf(t, m, "s1")
	marker := filepath.Join(t.TempDir(), "cancelled")
	_, err := call(t, ctxT(t, 30*time.Second), mustTool(t, tools, "mcp__fault__hang"), `{"marker": "`+marker+`"}`)
	if classOf(err) != tool.ClassTimeout || !strings.Contains(err.Error(), "call_timeout") {
		t.Fatalf("hang past call_timeout: class %s (%v)", classOf(err), err)
	}
	waitFile(t, marker, "cancelled")
}

func TestTenMegabyteResultIsCutForTheModel(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "fault", "tools"))
	tools := toolsOf(t, m, "s1")
	res, err := call(t, ctxT(t, 5*time.Minute), mustTool(t, tools, "mcp__fault__big"), `{"bytes": 10485760}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) > mcp.MaxResultBytes+200 {
		t.Fatalf("the result the model reads is %d bytes", len(res.Content))
	}
	if !strings.Contains(res.Content, "of its 10485760 bytes are not shown") {
		t.Fatalf("no note of the cut: %q", res.Content[len(res.Content)-120:])
	}
	// The server is fine afterwards.
	if _, err := call(t, ctxT(t, 30*time.Second), tools["mcp__fault__echo"], `{"text": "x"}`); err != nil {
		t.Fatal(err)
	}
}

func TestMalformedSchemasAreSkippedOrRepaired(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "fault", "badschema"))
	tools := toolsOf(t, m, "s1")
	for _, skipped := range []string{"bad_string", "bad_type", "bad_props"} {
		if _, ok := tools["mcp__fault__"+skipped]; ok {
			t.Errorf("%s is offered", skipped)
		}
	}
	for _, repaired := range []string{"bad_required", "no_type"} {
		tl := mustTool(t, tools, "mcp__fault__"+repaired)
		var schema map[string]any
		if err := json.Unmarshal(tl.Spec().InputSchema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s's schema: %s", repaired, tl.Spec().InputSchema)
		}
		if _, ok := schema["required"]; ok {
			t.Errorf("%s's schema keeps a bad required: %s", repaired, tl.Spec().InputSchema)
		}
		if res, err := call(t, ctxT(t, 30*time.Second), tl, `{}`); err != nil || res.Content != repaired+" ran" {
			t.Errorf("%s: %q, %v", repaired, res.Content, err)
		}
	}
	mustTool(t, tools, "mcp__fault__echo") // the good tools are unaffected
	problems := map[string]string{}
	for _, ts := range serverStatus(t, m, "fault").Tools {
		if ts.Problem != "" {
			problems[ts.Tool] = ts.Problem
			if (ts.Name == "") != ts.Skipped {
				t.Errorf("%s: name %q but skipped %v", ts.Tool, ts.Name, ts.Skipped)
			}
		}
	}
	for tl, want := range map[string]string{"bad_string": "not a JSON object", "bad_type": `type is "string"`,
		"bad_props": "properties are a number", "bad_required": "required", "no_type": "type"} {
		if !strings.Contains(problems[tl], want) {
			t.Errorf("the status's problem of %s is %q, want it to say %q", tl, problems[tl], want)
		}
	}
}

func TestToolRenamedWhileACallRuns(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "fault", "tools"))
	tools := toolsOf(t, m, "s1")
	old := mustTool(t, tools, "mcp__fault__rename")
	res, err := call(t, ctxT(t, 30*time.Second), old, `{}`)
	if err != nil || res.Content != "renamed myself" {
		t.Fatalf("the call that renamed its tool: %q, %v", res.Content, err)
	}
	// notifications/tools/list_changed: the next tool list has the new
	// name only.
	deadline := time.Now().Add(20 * time.Second)
	for {
		tools = toolsOf(t, m, "s1")
		_, gone := tools["mcp__fault__rename"]
		if _, ok := tools["mcp__fault__renamed"]; ok && !gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool list never followed the rename: %v", names(tools))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res, err := call(t, ctxT(t, 30*time.Second), tools["mcp__fault__renamed"], `{}`); err != nil || res.Content != "renamed ran" {
		t.Fatalf("the renamed tool: %q, %v", res.Content, err)
	}
	// A model that still calls the old name gets a clean failure.
	_, err = call(t, ctxT(t, 30*time.Second), old, `{}`)
	if err == nil {
		t.Fatal("the old name still works")
	}
	if c := classOf(err); c != tool.ClassExecution && c != tool.ClassInvalidInput {
		t.Fatalf("calling the old name: class %s (%v)", c, err)
	}
}

func TestServerThatNeverAnswersInitialize(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "silent", "noinit", "start_timeout: 500ms"), faultEntry(t, "fault", "tools"))
	start := time.Now()
	tools := toolsOf(t, m, "s1")
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the tool list waited %s", took)
	}
	mustTool(t, tools, "mcp__fault__echo") // the other server is unaffected
	for n := range tools {
		if strings.HasPrefix(n, "mcp__silent__") {
			t.Fatalf("the silent server offers %s", n)
		}
	}
	st := waitState(t, m, "silent", protocol.MCPStateRestarting, protocol.MCPStateFailed)
	if !strings.Contains(st.LastError, "start failed") || st.PID != 0 {
		t.Fatalf("status of the silent server: %+v", st)
	}
}

func TestServerThatExitsAtStartIsReportedAndLeftFailed(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "quitter", "exit"))
	if tools := toolsOf(t, m, "s1"); len(tools) != 0 {
		t.Fatalf("tools of a server that cannot start: %v", names(tools))
	}
	st := waitState(t, m, "quitter", protocol.MCPStateFailed)
	for _, want := range []string{"exited with status 7", "refusing to start"} {
		if !strings.Contains(st.LastError, want) {
			t.Errorf("last error %q does not say %q", st.LastError, want)
		}
	}
	if st.RetryAt == nil || st.Restarts != 4 {
		t.Fatalf("failed after %d restarts, retry at %v", st.Restarts, st.RetryAt)
	}
	// A turn before its retry time does not start it again.
	toolsOf(t, m, "s1")
	if again := serverStatus(t, m, "quitter"); again.Restarts != st.Restarts || again.State != protocol.MCPStateFailed {
		t.Fatalf("a failed server was started again before its retry time: %+v", again)
	}
}

func TestToolErrorsAndContent(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "fault", "tools"))
	tools := toolsOf(t, m, "s1")
	ctx := ctxT(t, 30*time.Second)
	_, err := call(t, ctx, mustTool(t, tools, "mcp__fault__fail"), `{}`)
	var te *tool.Error
	if !errors.As(err, &te) || te.Class != tool.ClassExecution || te.Message != "the thing is broken" {
		t.Fatalf("isError: %v", err)
	}
	res, err := call(t, ctx, mustTool(t, tools, "mcp__fault__picture"), `{}`)
	if err != nil {
		t.Fatal(err)
	}
	// The server's "image" is not one: it stays a line saying why, and
	// the model gets no image.
	if res.Content != "a dot:\n[image 1: image/png, 9 bytes; not shown to the model: the data is not a PNG, JPEG, GIF or WebP image]" ||
		len(res.Images) != 0 {
		t.Errorf("content: %q, %d images for the model", res.Content, len(res.Images))
	}
	if len(out(res).Images) != 1 || string(out(res).Images[0].Data) != "\x89PNG fake" {
		t.Errorf("images: %+v", out(res).Images)
	}
	if string(out(res).Structured) != `{"height":1,"width":1}` {
		t.Errorf("structured: %s", out(res).Structured)
	}
	if _, err := call(t, ctx, tools["mcp__fault__echo"], `[1, 2]`); classOf(err) != tool.ClassInvalidInput {
		t.Errorf("an input that is not an object: %v", err)
	}
	// The name a model is offered; the server's own name in the status.
	if _, ok := tools["mcp__fault__write_thing"]; !ok {
		t.Errorf("write.thing is not offered as mcp__fault__write_thing: %v", names(tools))
	}
	if k := tool.KindOf(tools["mcp__fault__echo"]); k != tool.KindExternal {
		t.Errorf("a read-only hint without trust_read_only_hints: kind %s", k)
	}
}

func TestReadOnlyHintsAreTrustedOnlyWhereConfigured(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "trusted", "tools", "trust_read_only_hints: true"), faultEntry(t, "plain", "tools"))
	tools := toolsOf(t, m, "s1")
	for name, want := range map[string]tool.Kind{
		"mcp__trusted__echo": tool.KindRead, "mcp__trusted__write_thing": tool.KindExternal,
		"mcp__plain__echo": tool.KindExternal, "mcp__plain__write_thing": tool.KindExternal,
	} {
		if got := tool.KindOf(mustTool(t, tools, name)); got != want {
			t.Errorf("%s: kind %s, want %s", name, got, want)
		}
	}
}

// groupChild is a stdio server started by a shell that leaves a child
// behind in its process group (as npx does), writing its pid to a file.
func groupChild(t *testing.T, name, pidFile string) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := "sleep 1000 & echo $! > " + strconv.Quote(pidFile) + "; exec " + strconv.Quote(exe)
	return "  " + name + ":\n    command: /bin/sh\n    args: [-c, " + strconv.Quote(script) + "]\n    env: {" + serverEnv + ": tools}\n"
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && n > 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) outlived its server", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNoProcessOutlivesItsServer(t *testing.T) {
	dir := t.TempDir()
	m, _ := newManager(t, groupChild(t, "a", filepath.Join(dir, "a")), groupChild(t, "b", filepath.Join(dir, "b")))
	tools := toolsOf(t, m, "s1")
	server := serverStatus(t, m, "a").PID
	childA, childB := readPid(t, filepath.Join(dir, "a")), readPid(t, filepath.Join(dir, "b"))
	// A crash: the server's group goes with it.
	if _, err := call(t, ctxT(t, 30*time.Second), mustTool(t, tools, "mcp__a__crash"), `{}`); classOf(err) != tool.ClassUnavailable {
		t.Fatalf("crash: %v", err)
	}
	waitGone(t, "the child of a crashed server", childA)
	waitGone(t, "a crashed server", server)
	// Close: every server and its group.
	if !alive(childB) {
		t.Fatal("b's child died early")
	}
	serverB := serverStatus(t, m, "b").PID
	if err := m.Close(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "a stopped server", serverB)
	waitGone(t, "the child of a stopped server", childB)
}

// Cancel at every point of a call: before it is sent, while the server
// works, as it answers. Each call ends at once, cancelled or completed,
// and the server is unharmed.
func TestCancelAtEveryPointOfACall(t *testing.T) {
	m, _ := newManager(t, faultEntry(t, "fault", "tools"))
	tools := toolsOf(t, m, "s1")
	sleepTool := mustTool(t, tools, "mcp__fault__sleep")
	for _, after := range []time.Duration{-1, 0, 50 * time.Microsecond, 500 * time.Microsecond, 2 * time.Millisecond,
		10 * time.Millisecond, 30 * time.Millisecond, 49 * time.Millisecond, 51 * time.Millisecond, 80 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		if after < 0 {
			cancel()
		} else {
			time.AfterFunc(after, cancel)
		}
		start := time.Now()
		res, err := call(t, ctx, sleepTool, `{"ms": 50}`)
		took := time.Since(start)
		cancel()
		switch {
		case err == nil && res.Content == "slept 50 ms":
		case classOf(err) == tool.ClassCancelled:
		default:
			t.Fatalf("cancelled after %s: %q, %v", after, res.Content, err)
		}
		if took > 10*time.Second {
			t.Fatalf("cancelled after %s, the call took %s", after, took)
		}
	}
	if res, err := call(t, ctxT(t, 30*time.Second), tools["mcp__fault__echo"], `{"text": "fine"}`); err != nil || res.Content != "echo: fine" {
		t.Fatalf("after the cancellations: %q, %v", res.Content, err)
	}
	if st := serverStatus(t, m, "fault"); st.Restarts != 0 || st.State != protocol.MCPStateRunning {
		t.Fatalf("the cancellations harmed the server: %+v", st)
	}
}
