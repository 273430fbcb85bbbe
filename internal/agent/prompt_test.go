package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/tool"
)

// promptLoop is a loop whose clock and home are set for prompt tests.
func promptLoop(t *testing.T, home string, now *time.Time, mod func(*agent.Config)) *agent.Loop {
	t.Helper()
	cfg := agent.Config{Tools: tool.NewRegistry(tool.Builtins()...), Home: home, Now: func() time.Time { return *now },
		Logger: quiet}
	if mod != nil {
		mod(&cfg)
	}
	return agent.New(cfg)
}

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	servertest.Must(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

func write(t *testing.T, path, text string) {
	t.Helper()
	servertest.Must(t, os.WriteFile(path, []byte(text), 0o644))
}

// TestSystemPromptTellsTheModelWhereItIs: the workspace, the operating
// system, the date (the day only), the session's mode with what it
// allows, and the tools' names.
func TestSystemPromptTellsTheModelWhereItIs(t *testing.T) {
	ws := t.TempDir()
	now := time.Date(2026, 11, 28, 9, 30, 0, 0, time.Local)
	l := promptLoop(t, "", &now, nil)
	p := l.SystemPrompt(agent.PromptInput{Workspace: ws, Root: openRoot(t, ws), Mode: "plan"})
	for _, want := range []string{agent.DefaultSystemPrompt, "Workspace: " + ws, "Operating system: " + runtime.GOOS,
		"Date: 2026-11-28\n", "Session mode: plan: tools that change files or run commands are refused", "read_file", "list_dir"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, p.Text)
		}
	}
	if strings.Contains(p.Text, "09:30") || strings.Contains(p.Text, "# Instructions") || len(p.Sources) != 0 {
		t.Errorf("time of day or instructions in:\n%s", p.Text)
	}
	if p2 := l.SystemPrompt(agent.PromptInput{Workspace: ws, Root: openRoot(t, ws)}); strings.Contains(p2.Text, "Session mode") {
		t.Errorf("a session without a mode is told one:\n%s", p2.Text)
	}
}

// TestSystemPromptIsStableWithinADay: the same prompt all day (so a
// provider's prompt cache keeps hitting), another the next day.
func TestSystemPromptIsStableWithinADay(t *testing.T) {
	ws := t.TempDir()
	now := time.Date(2026, 11, 28, 0, 0, 1, 0, time.Local)
	l := promptLoop(t, "", &now, nil)
	in := agent.PromptInput{Workspace: ws, Root: openRoot(t, ws)}
	morning := l.SystemPrompt(in).SHA256
	now = now.Add(23 * time.Hour)
	if l.SystemPrompt(in).SHA256 != morning {
		t.Fatal("the prompt changed within the day")
	}
	now = now.Add(2 * time.Hour)
	if l.SystemPrompt(in).SHA256 == morning {
		t.Fatal("the prompt did not change with the day")
	}
}

// TestSystemPromptReadsInstructionFiles: <home>/AGENTS.md then the
// workspace's, CLAUDE.md only where there is no AGENTS.md, each cut at
// its limit and re-read when it changes; a symlink out of the workspace
// and a FIFO are not read.
func TestSystemPromptReadsInstructionFiles(t *testing.T) {
	home, ws, outside := t.TempDir(), t.TempDir(), t.TempDir()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.Local)
	l := promptLoop(t, home, &now, func(c *agent.Config) { c.MaxInstructionBytes = 64 })
	in := agent.PromptInput{Workspace: ws, Root: openRoot(t, ws)}

	write(t, filepath.Join(home, "CLAUDE.md"), "home rules from CLAUDE.md")
	write(t, filepath.Join(ws, "CLAUDE.md"), "workspace claude rules")
	write(t, filepath.Join(ws, "AGENTS.md"), "use tabs\n"+strings.Repeat("x", 100))
	p := l.SystemPrompt(in)
	text := p.Text
	hi, wi := strings.Index(text, "home rules from CLAUDE.md"), strings.Index(text, "use tabs")
	if hi < 0 || wi < hi || strings.Contains(text, "workspace claude rules") || !strings.Contains(text, "[metis cut this file at 64 bytes]") {
		t.Fatalf("instructions:\n%s", text)
	}
	if len(p.Sources) != 2 || p.Sources[0].Scope != "home" || p.Sources[0].Path != filepath.Join(home, "CLAUDE.md") ||
		p.Sources[1].Path != "AGENTS.md" || !p.Sources[1].Truncated || p.Sources[1].Bytes != 64 {
		t.Fatalf("sources %+v", p.Sources)
	}

	// Edited: read again at once.
	write(t, filepath.Join(ws, "AGENTS.md"), "use spaces")
	if p2 := l.SystemPrompt(in); !strings.Contains(p2.Text, "use spaces") || p2.SHA256 == p.SHA256 {
		t.Fatalf("the edit was not read:\n%s", p2.Text)
	}

	// A symlink out of the workspace is not followed (and CLAUDE.md,
	// whose AGENTS.md exists but cannot be read, is the fallback).
	write(t, filepath.Join(outside, "secret.md"), "SECRET")
	servertest.Must(t, os.Remove(filepath.Join(ws, "AGENTS.md")))
	servertest.Must(t, os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(ws, "AGENTS.md")))
	if p3 := l.SystemPrompt(in); strings.Contains(p3.Text, "SECRET") {
		t.Fatalf("a symlink out of the workspace was followed:\n%s", p3.Text)
	}

	// A FIFO never blocks the prompt.
	servertest.Must(t, os.Remove(filepath.Join(ws, "AGENTS.md")))
	servertest.Must(t, syscall.Mkfifo(filepath.Join(ws, "AGENTS.md"), 0o644))
	done := make(chan string, 1)
	go func() { done <- l.SystemPrompt(in).Text }()
	select {
	case text := <-done:
		if !strings.Contains(text, "workspace claude rules") {
			t.Fatalf("with AGENTS.md a FIFO, CLAUDE.md is read:\n%s", text)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a FIFO AGENTS.md blocked the prompt")
	}
}

// TestSystemPromptSettingReplacesTheBase: system-prompt, else its file,
// replaces the default; the environment is still told.
func TestSystemPromptSettingReplacesTheBase(t *testing.T) {
	ws := t.TempDir()
	now := time.Now()
	file := filepath.Join(t.TempDir(), "prompt.md")
	write(t, file, "You are a terse reviewer.")
	for _, c := range []struct {
		mod  func(*agent.Config)
		want string
	}{
		{func(c *agent.Config) { c.System = "Answer in French." }, "Answer in French."},
		{func(c *agent.Config) { c.SystemFile = file }, "You are a terse reviewer."},
		{func(c *agent.Config) { c.SystemFile = filepath.Join(ws, "missing") }, agent.DefaultSystemPrompt},
	} {
		p := promptLoop(t, "", &now, c.mod).SystemPrompt(agent.PromptInput{Workspace: ws})
		if !strings.HasPrefix(p.Text, c.want) || !strings.Contains(p.Text, "Workspace: "+ws) {
			t.Errorf("prompt:\n%s\nwant it to start with %q", p.Text, c.want)
		}
	}
}

// TestCallStartedNamesThePrompt: llm.call_started carries the digest of
// the prompt the call sent, the one SystemPrompt shows.
func TestCallStartedNamesThePrompt(t *testing.T) {
	w := &windowModel{}
	r := newRig(t, w)
	withLoop(r, w, nil)
	_, evs := r.runWith(context.Background(), agent.Turn{})
	req := payload(t, find(evs, event.LLMCallStarted)[0])["request"].(map[string]any)
	want := r.loop.SystemPrompt(agent.PromptInput{Root: r.root})
	if req["system_sha256"] != want.SHA256 || w.requests()[0].System != want.Text {
		t.Fatalf("system_sha256 %v, want %s", req["system_sha256"], want.SHA256)
	}
}
