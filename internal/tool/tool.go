package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// Error classes of a failed tool call (tool.failed error_class).
const (
	ClassInvalidInput     = "invalid_input"
	ClassPermissionDenied = "permission_denied"
	ClassNotFound         = "not_found"
	ClassTimeout          = "timeout"
	ClassCancelled        = "cancelled"
	ClassExecution        = "execution_error"
	// ClassUnavailable: the server behind the tool (an MCP server) is
	// not running, or its process or connection ended during the call.
	ClassUnavailable = "unavailable"
)

// Error is a classified tool failure.
type Error struct {
	Class   string
	Message string
}

func (e *Error) Error() string { return e.Class + ": " + e.Message }

// Errorf returns a classified error.
func Errorf(class, format string, args ...any) *Error {
	return &Error{Class: class, Message: fmt.Sprintf(format, args...)}
}

// ClassOf returns the class of err: *Error's own, cancelled or timeout
// for context errors, execution_error otherwise.
func ClassOf(err error) string {
	var te *Error
	switch {
	case errors.As(err, &te):
		return te.Class
	case errors.Is(err, context.Canceled):
		return ClassCancelled
	case errors.Is(err, context.DeadlineExceeded):
		return ClassTimeout
	}
	return ClassExecution
}

// Env is what a tool call may use.
type Env struct {
	// Root confines file access to the session's workspace.
	Root *os.Root
	// Workspace is the absolute workspace path (for subprocess cwd).
	Workspace string
	SessionID string
	TurnID    string
	// ToolUseID is the call's tool_use id (a background command records
	// the call that started it).
	ToolUseID string
	// AllowNetwork lets this call's shell command bind and connect TCP
	// sockets, which the sandbox refuses unless its settings allow them
	// (for a permission rule that allows the network per call).
	AllowNetwork bool
	// Output, if set, receives a running call's live output (shell,
	// liveoutput.go), in order, before the call returns; it must not
	// block for long. Nil: none is streamed.
	Output func(OutputChunk)
	// Editor, if set, is the editors attached to sessions: read_file,
	// write_file and edit_file read and write through the session's
	// editor when it offers to, and use the disk otherwise (editorfs.go).
	Editor Editor
}

// Result is a successful tool call's output, fed back to the model.
type Result struct {
	Content string // what the model reads
	Summary string // one line for events and UIs
	// Change is set by the tools that change files (write_file,
	// edit_file, apply_patch): the paths changed and their unified
	// diff, carried by the call's tool.completed event.
	Change *Change
	// Images are image blocks with their bytes (read_file of an image):
	// the agent loop stores them and puts them in the tool result.
	Images []message.Block
	// Output is what a tool returned beyond its text (MCP tools), nil
	// for none; the call's tool.completed event carries it.
	Output *Output
	// Via says which path served a file tool while an editor was
	// attached to the session: ViaEditor or ViaDisk (the editor could
	// not serve it; the summary says why). "" when no editor offered it.
	Via string
	// ExitCode is the command's exit code (shell, in the foreground),
	// nil otherwise.
	ExitCode *int
}

// Output is a tool's output beyond its text.
type Output struct {
	// Structured is a tool's structured output (an MCP tool's
	// structuredContent).
	Structured json.RawMessage
	// Images are the images a tool returned, kept for the models that
	// take images in tool results; Content describes each.
	Images []Image
}

// Image is an image a tool returned.
type Image struct {
	MediaType string // image/png, …
	Data      []byte
}

// Previewer is implemented by the tools that change files: Preview
// computes the Change a call with this input would make, without
// writing anything, so that an approval prompt can show the diff before
// the user answers. It fails as Run would on input that Run refuses
// (bad input, a path out of the workspace, an edit that does not apply).
type Previewer interface {
	Preview(ctx context.Context, env Env, input json.RawMessage) (Change, error)
}

// Tool is one callable tool.
type Tool interface {
	Spec() model.ToolSpec
	// Run executes the call. It must return promptly once ctx is done.
	Run(ctx context.Context, env Env, input json.RawMessage) (Result, error)
}

// Registry holds tools by name.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
	offer func(modelID, name string) bool
	// more, in a registry made by ForSession, holds the registry it
	// extends and the tools of a Source (source.go).
	more *sourced
}

// NewRegistry returns a registry holding tools.
func NewRegistry(tools ...Tool) *Registry {
	r := &Registry{tools: map[string]Tool{}}
	for _, t := range tools {
		r.Register(t)
	}
	return r
}

// Register adds or replaces a tool.
func (r *Registry) Register(t Tool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tools[t.Spec().Name] = t
}

// Get returns a tool by name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	t, ok := r.tools[name]
	r.mu.RUnlock()
	if !ok && r.more != nil {
		return r.more.get(name)
	}
	return t, ok
}

// Specs returns every tool's spec, sorted by name.
func (r *Registry) Specs() []model.ToolSpec {
	r.mu.RLock()
	out := make([]model.ToolSpec, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t.Spec())
	}
	r.mu.RUnlock()
	if r.more != nil {
		out = append(out, r.more.specs()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SetOffer installs the policy that chooses, per model, which tools it
// is offered (SpecsFor); nil offers every tool to every model. A tool
// not offered can still be called (Get finds it).
func (r *Registry) SetOffer(offer func(modelID, name string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.offer = offer
}

// SpecsFor returns the specs of the tools offered to the model
// modelID, sorted by name.
func (r *Registry) SpecsFor(modelID string) []model.ToolSpec {
	r.mu.RLock()
	offer := r.offer
	r.mu.RUnlock()
	all := r.Specs()
	if offer == nil {
		return all
	}
	out := all[:0]
	for _, s := range all {
		if offer(modelID, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// decodeInput strictly decodes a tool input object into v.
func decodeInput(input json.RawMessage, v any) error {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if err := json.Unmarshal(input, v); err != nil {
		return Errorf(ClassInvalidInput, "input is not a valid object for this tool: %v", err)
	}
	return nil
}
