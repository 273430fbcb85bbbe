package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/tool"
)

// MaxResultBytes bounds the text of an MCP tool's result the model
// reads; the rest is cut, with a note saying how much.
const MaxResultBytes = 256 << 10

// MaxResultImages bounds the images of one result passed to the model,
// as the images of one user message are by default; later ones are
// described only.
const MaxResultImages = 10

// result turns a tools/call result into the call's outcome. Text
// content is the result, in order; every other content block is
// described in a line of its own. An image (image content, or an
// embedded resource whose blob is an image) is checked by its content
// as read_file's images are (images.Check, the default limits: PNG,
// JPEG, GIF or WebP, 5 MiB, whole, not a decompression bomb); one that
// passes, up to MaxResultImages, goes to the model as an image of the
// tool result (the agent loop stores it once and sends a model that
// cannot see images a text stub in its place), its line saying it is
// attached; one that does not keeps a line saying why it was left out.
// Every image is also kept in the result's Output for the event. Audio
// and other binary data are described only. structuredContent is kept
// for the event, and is the text when the server sent no content at
// all. isError fails the call (execution_error) with the text as its
// message.
func result(ctx context.Context, name string, r *sdk.CallToolResult) (tool.Result, error) {
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
			line(attach(ctx, &out, fmt.Sprintf("image %d", len(more.Images)), c.MIMEType, c.Data))
		case *sdk.AudioContent:
			counts["audio"]++
			line(fmt.Sprintf("[audio: %s, %d bytes; not passed to the model]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.ResourceLink:
			counts["resource link"]++
			line(fmt.Sprintf("[resource link: %s <%s>%s]", orUnknown(c.Name), c.URI, mimeNote(c.MIMEType)))
		case *sdk.EmbeddedResource:
			counts["resource"]++
			if rc := c.Resource; rc != nil && rc.Text == "" && images.Sniff(rc.Blob) != "" {
				counts["image"]++
				more.Images = append(more.Images, tool.Image{MediaType: rc.MIMEType, Data: rc.Blob})
				line(attach(ctx, &out, "resource "+rc.URI, rc.MIMEType, rc.Blob))
				continue
			}
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

// attach checks an image an MCP server returned (what names it in the
// result's text) and, if it passes and the result holds fewer than
// MaxResultImages, adds it to out's images for the model; it returns
// the line the result's text says about it. The media type the server
// claims must name the format of the bytes; an image without one is
// taken by its magic bytes. A PNG refused for a damaged ancillary
// chunk passes without it (images.DropDamagedPNGChunks).
func attach(ctx context.Context, out *tool.Result, what, claimed string, data []byte) string {
	if strings.TrimSpace(claimed) == "" {
		claimed = images.Sniff(data)
	}
	if len(out.Images) >= MaxResultImages {
		return fmt.Sprintf("[%s: %s, %d bytes; not shown to the model: a result passes at most %d images]", what, orUnknown(claimed), len(data), MaxResultImages)
	}
	info, err := images.Check(ctx, data, claimed, images.DefaultLimits())
	note := ""
	if err != nil {
		// A damaged ancillary chunk (a colour profile with a bad CRC:
		// the reference server's own tiny image has one) is dropped, as
		// browsers skip it, and the image checked again.
		if fixed, dropped := images.DropDamagedPNGChunks(data); len(dropped) > 0 {
			if info, err = images.Check(ctx, fixed, claimed, images.DefaultLimits()); err == nil {
				data, note = fixed, fmt.Sprintf(" (its damaged %s chunk left out)", strings.Join(dropped, ", "))
			}
		}
	}
	if err != nil {
		why := "it could not be checked"
		var ie *images.Error
		if errors.As(err, &ie) {
			why = ie.Message
		}
		return fmt.Sprintf("[%s: %s, %d bytes; not shown to the model: %s]", what, orUnknown(claimed), len(data), why)
	}
	b := message.Image(info.MediaType, info.SHA256, info.Size, info.Width, info.Height)
	b.Data = data
	out.Images = append(out.Images, b)
	return fmt.Sprintf("[%s: %s, attached%s]", what, images.Describe(info.MediaType, info.Width, info.Height, info.Size), note)
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
