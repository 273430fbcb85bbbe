package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on what a server's tool list may put in front of a model.
const (
	// MaxSchemaBytes bounds one tool's input schema, encoded.
	MaxSchemaBytes = 64 << 10
	// MaxDescriptionBytes bounds one tool's description; a longer one is
	// cut.
	MaxDescriptionBytes = 4 << 10
	// MaxTools bounds the tools offered from one server.
	MaxTools = 500
)

// inputSchema checks a tool's input schema, as the server sent it, and
// returns it encoded for the model: a JSON object whose type is
// "object". What can be repaired is (no schema, no type, a required
// list that is not a list of property names), with a note saying what;
// a schema that cannot be (not an object, another type, properties that
// are not an object, larger than MaxSchemaBytes) is an error, and the
// tool is skipped: one malformed tool never breaks a turn.
func inputSchema(s any) (json.RawMessage, string, error) {
	var notes []string
	var m map[string]any
	switch v := s.(type) {
	case nil:
		m = map[string]any{}
		notes = append(notes, "no input schema: takes an empty object")
	case map[string]any:
		m = v
	default:
		// The SDK decodes inputSchema into any; other shapes arrive as
		// themselves. Re-decode a typed value through JSON.
		b, err := json.Marshal(v)
		if err != nil {
			return nil, "", errors.New("the input schema does not encode as JSON")
		}
		if err := json.Unmarshal(b, &m); err != nil || m == nil {
			return nil, "", fmt.Errorf("the input schema is %s, not a JSON object", kindOf(v))
		}
	}
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	switch t := out["type"].(type) {
	case nil:
		out["type"] = "object"
		if _, ok := m["type"]; !ok && s != nil {
			notes = append(notes, `no "type": taken as an object`)
		}
	case string:
		if t != "object" {
			return nil, "", fmt.Errorf("the input schema's type is %q; a tool's input is an object", t)
		}
	default:
		return nil, "", fmt.Errorf("the input schema's type is %s, not \"object\"", kindOf(t))
	}
	if p, ok := out["properties"]; ok {
		if _, isMap := p.(map[string]any); !isMap && p != nil {
			return nil, "", fmt.Errorf("the input schema's properties are %s, not an object", kindOf(p))
		}
		if p == nil {
			delete(out, "properties")
		}
	}
	if r, ok := out["required"]; ok {
		if !stringList(r) {
			delete(out, "required")
			notes = append(notes, `"required" is not a list of names: dropped`)
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, "", fmt.Errorf("the input schema does not encode as JSON: %v", err)
	}
	if len(b) > MaxSchemaBytes {
		return nil, "", fmt.Errorf("the input schema is %d bytes; the limit is %d", len(b), MaxSchemaBytes)
	}
	return b, strings.Join(notes, "; "), nil
}

func stringList(v any) bool {
	l, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range l {
		if _, ok := e.(string); !ok {
			return false
		}
	}
	return true
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, json.Number, int, int64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// description is a tool's description as offered: valid UTF-8, at most
// MaxDescriptionBytes (cut with an ellipsis).
func description(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxDescriptionBytes {
		return s
	}
	n := MaxDescriptionBytes - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// firstLine is the first line of s, for status.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		n := 200
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}
