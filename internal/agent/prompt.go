package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/safefile"
)

// DefaultInstructionBytes bounds each instruction file (AGENTS.md,
// CLAUDE.md) read into the system prompt; a longer one is cut.
const DefaultInstructionBytes = 32 << 10

// instructionNames are the instruction files looked for, in order: the
// first that exists is read (CLAUDE.md only where there is no AGENTS.md).
var instructionNames = []string{"AGENTS.md", "CLAUDE.md"}

// modeNotes tell the model what each session mode lets its tools do
// (contract §7); a mode not listed is named without a note.
var modeNotes = map[string]string{
	"default":      "tools that only read run at once; tools that change files, run commands or reach the network ask the user first, who may refuse.",
	"accept_edits": "file changes inside the workspace run at once; commands and network access ask the user first.",
	"plan":         "tools that change files or run commands are refused. Investigate with the read-only tools and answer with a plan for the user to approve.",
	"auto":         "every tool runs without asking.",
}

// Prompt is an assembled system prompt.
type Prompt struct {
	Text    string
	SHA256  string // hex digest of Text
	Sources []PromptSource
}

// PromptSource is an instruction file read into a prompt.
type PromptSource struct {
	Path      string // "AGENTS.md" in the workspace; absolute in the home
	Scope     string // "workspace" or "home"
	Bytes     int
	Truncated bool
}

// PromptInput is what a system prompt depends on besides the loop's
// configuration.
type PromptInput struct {
	Workspace string
	Root      *os.Root // the workspace, through which its AGENTS.md is read
	// Mode is the session's mode (contract §7); "" leaves it out.
	Mode string
}

// SystemPrompt assembles the system prompt a model call of the session
// sends (docs/context.md, "What the model is told"): the base (the
// system-prompt setting, or its file, or DefaultSystemPrompt), the
// environment (workspace, operating system, today's date, the session's
// mode, the tools), and the instruction files, <home>/AGENTS.md then the
// workspace's AGENTS.md (CLAUDE.md where there is none), each cut at
// MaxInstructionBytes. It is read afresh for each turn, so an edited
// AGENTS.md counts from the next turn. The date is the day only: the
// prompt stays the same all day, and a provider's prompt cache with it.
func (l *Loop) SystemPrompt(in PromptInput) Prompt {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(l.basePrompt()))
	b.WriteString("\n\n# Environment\n")
	fmt.Fprintf(&b, "- Workspace: %s (tool paths are relative to it)\n", in.Workspace)
	fmt.Fprintf(&b, "- Operating system: %s (%s)\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "- Date: %s\n", l.cfg.Now().Format("2006-01-02"))
	if in.Mode != "" {
		note := modeNotes[in.Mode]
		if note != "" {
			note = ": " + note
		}
		fmt.Fprintf(&b, "- Session mode: %s%s\n", in.Mode, note)
	}
	var names []string
	for _, s := range l.cfg.Tools.Specs() {
		names = append(names, s.Name)
	}
	fmt.Fprintf(&b, "- Tools: %s\n", strings.Join(names, ", "))

	var p Prompt
	var files strings.Builder
	// add reads the first instruction file of dir (through root for the
	// workspace) into the prompt.
	add := func(scope string, root *os.Root, dir string) {
		for _, name := range instructionNames {
			path := name
			if root == nil {
				path = filepath.Join(dir, name)
			}
			data, cut, err := safefile.ReadHead(root, path, int64(l.cfg.MaxInstructionBytes))
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					l.cfg.Logger.Warn("instruction file not read", "scope", scope, "file", path, "err", err)
				}
				continue
			}
			text := strings.TrimSpace(strings.ToValidUTF8(string(trimRune(data)), "\uFFFD"))
			p.Sources = append(p.Sources, PromptSource{Path: path, Scope: scope, Bytes: len(data), Truncated: cut})
			fmt.Fprintf(&files, "\n## %s (%s)\n\n%s\n", path, scope, text)
			if cut {
				fmt.Fprintf(&files, "\n[metis cut this file at %d bytes]\n", l.cfg.MaxInstructionBytes)
			}
			return
		}
	}
	if l.cfg.Home != "" {
		add("home", nil, l.cfg.Home)
	}
	if in.Root != nil {
		add("workspace", in.Root, "")
	}
	if files.Len() > 0 {
		b.WriteString("\n# Instructions\n\nThe user's instruction files follow, the general ones first; follow them unless the user says otherwise in the conversation.\n")
		b.WriteString(files.String())
	}
	p.Text = b.String()
	sum := sha256.Sum256([]byte(p.Text))
	p.SHA256 = hex.EncodeToString(sum[:])
	return p
}

// basePrompt is the system-prompt setting, else the file of
// system-prompt-file (read afresh; a file that cannot be read is logged
// and the default used), else DefaultSystemPrompt.
func (l *Loop) basePrompt() string {
	if l.cfg.System != "" {
		return l.cfg.System
	}
	if l.cfg.SystemFile != "" {
		b, err := safefile.ReadRegular(l.cfg.SystemFile, safefile.DefaultLimit)
		if err == nil && strings.TrimSpace(string(b)) != "" {
			return strings.ToValidUTF8(string(b), "\uFFFD")
		}
		l.cfg.Logger.Warn("system-prompt-file not read; using the default system prompt", "file", l.cfg.SystemFile, "err", err)
	}
	return DefaultSystemPrompt
}

// trimRune drops a UTF-8 sequence cut at the end of b.
func trimRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}
