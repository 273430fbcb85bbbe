package mcp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metis-agent/metis/internal/tool"
)

func decodeAny(t testing.TB, s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestInputSchemas(t *testing.T) {
	for _, c := range []struct {
		in, want, note, err string
	}{
		{in: `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
			want: `{"properties":{"a":{"type":"string"}},"required":["a"],"type":"object"}`},
		{in: `null`, want: `{"type":"object"}`, note: "no input schema"},
		{in: `{"properties":{}}`, want: `{"properties":{},"type":"object"}`, note: `no "type"`},
		{in: `{"type":"object","required":"a"}`, want: `{"type":"object"}`, note: `"required" is not a list`},
		{in: `{"type":"object","required":[1]}`, want: `{"type":"object"}`, note: `"required" is not a list`},
		{in: `{"type":"object","properties":null}`, want: `{"type":"object"}`},
		{in: `"a string"`, err: "a string, not a JSON object"},
		{in: `[1]`, err: "an array, not a JSON object"},
		{in: `{"type":"string"}`, err: `type is "string"`},
		{in: `{"type":["object"]}`, err: `type is an array`},
		{in: `{"type":"object","properties":[]}`, err: "properties are an array"},
		{in: `{"type":"object","description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`, err: "the limit is"},
	} {
		got, note, err := inputSchema(decodeAny(t, c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%.40s: error %v, want it to say %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want || !strings.Contains(note, c.note) || (c.note == "" && note != "") {
			t.Errorf("%.40s: %s, note %q, %v; want %s, note %q", c.in, got, note, err, c.want, c.note)
		}
	}
}

// FuzzInputSchema: whatever a server sends as a tool's inputSchema,
// inputSchema never panics, and what it accepts is a JSON object of
// type "object" within MaxSchemaBytes.
func FuzzInputSchema(f *testing.F) {
	for _, s := range []string{`null`, `{}`, `{"type":"object"}`, `{"type":"string"}`, `"x"`, `[{}]`, `5`, `true`,
		`{"type":"object","properties":{"a":{"$ref":"#/x"}},"required":["a",1]}`, `{"type":null,"properties":null}`,
		`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{}}}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		out, _, err := inputSchema(v)
		if err != nil {
			return
		}
		var m map[string]any
		if json.Unmarshal(out, &m) != nil || m["type"] != "object" || len(out) > MaxSchemaBytes {
			t.Fatalf("accepted %s as %s", b, out)
		}
		if p, ok := m["properties"]; ok {
			if _, isMap := p.(map[string]any); !isMap {
				t.Fatalf("accepted properties %v", p)
			}
		}
	})
}

func TestDescriptionsAreBounded(t *testing.T) {
	long := strings.Repeat("é", MaxDescriptionBytes)
	d := description(long)
	if len(d) > MaxDescriptionBytes || !utf8.ValidString(d) || !strings.HasSuffix(d, "…") {
		t.Fatalf("description of %d bytes: %d bytes, valid %v", len(long), len(d), utf8.ValidString(d))
	}
	if description("short\xff") != "short\uFFFD" {
		t.Fatal("invalid UTF-8 kept")
	}
}

func TestResults(t *testing.T) {
	img := &sdk.ImageContent{MIMEType: "image/jpeg", Data: []byte{1, 2, 3}}
	for _, c := range []struct {
		name    string
		in      *sdk.CallToolResult
		content string
		errText string
	}{
		{"text blocks in order", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}}, "a\nb", ""},
		{"an image that is not one described", &sdk.CallToolResult{Content: []sdk.Content{img}},
			"[image 1: image/jpeg, 3 bytes; not shown to the model: the data is not a PNG, JPEG, GIF or WebP image]", ""},
		{"audio", &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte{1}}}},
			"[audio: audio/wav, 1 bytes; not passed to the model]", ""},
		{"a resource link", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{URI: "file:///a", Name: "a", MIMEType: "text/plain"}}},
			"[resource link: a <file:///a>, text/plain]", ""},
		{"an embedded text resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "x:1", Text: "body"}}}},
			"[resource x:1]\nbody", ""},
		{"an embedded blob", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "x:2", Blob: []byte{0, 1}}}}},
			"[resource x:2: 2 bytes of binary data; not passed to the model]", ""},
		{"structured only", &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"k": 1}}, `{"k":1}`, ""},
		{"isError", &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "bad"}}}, "", "bad"},
		{"isError without text", &sdk.CallToolResult{IsError: true}, "", "without a message"},
	} {
		res, err := result(t.Context(), "t", c.in)
		if c.errText != "" {
			if tool.ClassOf(err) != tool.ClassExecution || !strings.Contains(err.Error(), c.errText) {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err != nil || res.Content != c.content {
			t.Errorf("%s: %q, %v; want %q", c.name, res.Content, err, c.content)
		}
	}
}
