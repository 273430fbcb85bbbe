package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metis-agent/metis/internal/tool"
)

// MaxResultBytes bounds the text of an MCP tool's result the model
// reads; the rest is cut, with a note saying how much.
const MaxResultBytes = 256 << 10

// result turns a tools/call result into the call's outcome. Text
// content is the result, in order; every other content block is
// described in a line of its own (images and audio are not sent to the
// model yet: their data is kept in the result's Images, and the event
// describes them). structuredContent is kept for the event, and is the
// text when the server sent no content at all. isError fails the call
// (execution_error) with the text as its message.
func result(name string, r *sdk.CallToolResult) (tool.Result, error) {
	if r == nil {
		return tool.Result{}, tool.Errorf(tool.ClassExecution, "the MCP server sent no result")
	}
	var (
		b      strings.Builder
		out    tool.Result
		more   tool.Output
		counts = map[string]int{}
	)
	line := func(s string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	for _, c := range r.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			counts["text"]++
			line(c.Text)
		case *sdk.ImageContent:
			counts["image"]++
			more.Images = append(more.Images, tool.Image{MediaType: c.MIMEType, Data: c.Data})
			line(fmt.Sprintf("[image %d: %s, %d bytes; not shown to the model]", len(more.Images), orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.AudioContent:
			counts["audio"]++
			line(fmt.Sprintf("[audio: %s, %d bytes; not passed to the model]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.ResourceLink:
			counts["resource link"]++
			line(fmt.Sprintf("[resource link: %s <%s>%s]", orUnknown(c.Name), c.URI, mimeNote(c.MIMEType)))
		case *sdk.EmbeddedResource:
			counts["resource"]++
			line(embedded(c.Resource))
		default:
			counts["other"]++
			line(fmt.Sprintf("[content of type %T; not passed to the model]", c))
		}
	}
	if r.StructuredContent != nil {
		s, err := json.Marshal(r.StructuredContent)
		if err == nil {
			more.Structured = s
			counts["structured"]++
			if len(r.Content) == 0 {
				line(string(s))
			}
		}
	}
	text := b.String()
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	if len(text) > MaxResultBytes {
		total := len(text)
		text = cutUTF8(text, MaxResultBytes) + fmt.Sprintf("\n[result cut: %d of its %d bytes are not shown]", total-MaxResultBytes, total)
	}
	if r.IsError {
		if strings.TrimSpace(text) == "" {
			text = "the tool reported an error without a message"
		}
		return tool.Result{}, tool.Errorf(tool.ClassExecution, "%s", text)
	}
	out.Content = text
	out.Summary = summary(name, len(text), counts)
	if more.Structured != nil || len(more.Images) > 0 {
		out.Output = &more
	}
	return out, nil
}

func embedded(rc *sdk.ResourceContents) string {
	if rc == nil {
		return "[embedded resource without contents]"
	}
	if rc.Text != "" || rc.Blob == nil {
		return fmt.Sprintf("[resource %s%s]\n%s", rc.URI, mimeNote(rc.MIMEType), rc.Text)
	}
	return fmt.Sprintf("[resource %s%s: %d bytes of binary data; not passed to the model]", rc.URI, mimeNote(rc.MIMEType), len(rc.Blob))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

func mimeNote(s string) string {
	if s == "" {
		return ""
	}
	return ", " + s
}

func summary(name string, n int, counts map[string]int) string {
	var parts []string
	for _, k := range []string{"image", "audio", "resource link", "resource", "structured", "other"} {
		if c := counts[k]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, k))
		}
	}
	s := fmt.Sprintf("%s: %d bytes", name, n)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
