package tool

import (
	"encoding/json"
	"path/filepath"
	"strings"
)

// What the built-in tools do, and what their permission rules match on
// (Classified and Targeted, see kind.go).

// Kind implements Classified: list_dir only reads.
func (ListDir) Kind() Kind { return KindRead }

// Targets implements Targeted: the directory, workspace-relative.
func (ListDir) Targets(input json.RawMessage) ([]string, error) { return pathTarget(input, true) }

// Kind implements Classified: read_file only reads.
func (ReadFile) Kind() Kind { return KindRead }

// Targets implements Targeted: the file, workspace-relative.
func (ReadFile) Targets(input json.RawMessage) ([]string, error) { return pathTarget(input, false) }

// Kind implements Classified: write_file changes a file.
func (WriteFile) Kind() Kind { return KindEdit }

// Targets implements Targeted: the file it writes, workspace-relative.
func (WriteFile) Targets(input json.RawMessage) ([]string, error) { return pathTarget(input, false) }

// Kind implements Classified: shell runs commands.
func (Shell) Kind() Kind { return KindExecute }

// Targets implements Targeted: the command line, as given.
func (Shell) Targets(input json.RawMessage) ([]string, error) {
	var in struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal(orEmptyObject(input), &in); err != nil {
		return nil, Errorf(ClassInvalidInput, "input is not a valid object for shell: %v", err)
	}
	if strings.TrimSpace(in.Command) == "" {
		return nil, Errorf(ClassInvalidInput, "command is required")
	}
	return []string{in.Command}, nil
}

// pathTarget returns the "path" of a file tool's input cleaned as the
// tool cleans it (slash-separated, relative to the workspace). A path
// the tool would refuse (absolute, leaving the workspace, too long) is
// an error: it cannot be judged, and the tool reports it when it runs.
// An empty path is the workspace itself where emptyOK, an error
// otherwise.
func pathTarget(input json.RawMessage, emptyOK bool) ([]string, error) {
	var in struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(orEmptyObject(input), &in); err != nil {
		return nil, Errorf(ClassInvalidInput, "input is not a valid object: %v", err)
	}
	if in.Path == "" && !emptyOK {
		return nil, Errorf(ClassInvalidInput, "path is required")
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return nil, err
	}
	return []string{filepath.ToSlash(p)}, nil
}

func orEmptyObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}
