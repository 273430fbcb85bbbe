package mcp

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metis-agent/metis/internal/message"
)

// pngOf encodes a w×h PNG.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.NRGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestResultImagesGoToTheModel: an MCP image, and an embedded resource
// whose blob is an image, that pass the checks read_file's images pass
// become image blocks of the tool result (with their bytes, SHA-256 and
// size) and the text says they are attached; an image with a lying
// media type, a truncated one, one past MaxResultImages are left out
// with a line saying why, and every image stays in the event's output.
func TestResultImagesGoToTheModel(t *testing.T) {
	good := pngOf(t, 3, 2)
	content := []sdk.Content{
		&sdk.TextContent{Text: "here"},
		&sdk.ImageContent{MIMEType: "image/png", Data: good},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "res://pic", MIMEType: "image/png", Blob: good}},
		&sdk.ImageContent{MIMEType: "image/jpeg", Data: good},
		&sdk.ImageContent{MIMEType: "image/png", Data: good[:len(good)-10]},
		&sdk.ImageContent{Data: good},
	}
	res, err := result(t.Context(), "t", &sdk.CallToolResult{Content: content})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Images) != 3 {
		t.Fatalf("%d images for the model, want 3 (the image, the resource, the one without a media type): %s", len(res.Images), res.Content)
	}
	for _, b := range res.Images {
		if b.Type != message.BlockImage || b.MediaType != "image/png" || !bytes.Equal(b.Data, good) || len(b.SHA256) != 64 ||
			b.Size != int64(len(good)) || b.Width != 3 || b.Height != 2 {
			t.Fatalf("image block %+v", b)
		}
	}
	for _, want := range []string{
		"here",
		"[image 1: PNG 3×2",
		"[resource res://pic: PNG 3×2",
		"[image 3: image/jpeg, " + fmt.Sprint(len(good)) + " bytes; not shown to the model: media_type says image/jpeg but the data is PNG]",
		"[image 4: image/png, " + fmt.Sprint(len(good)-10) + " bytes; not shown to the model:",
		"[image 5: PNG 3×2",
	} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("the result's text lacks %q:\n%s", want, res.Content)
		}
	}
	if res.Output == nil || len(res.Output.Images) != 5 {
		t.Fatalf("the event's output keeps %+v, want the 5 images", res.Output)
	}

	many := make([]sdk.Content, MaxResultImages+1)
	for i := range many {
		many[i] = &sdk.ImageContent{MIMEType: "image/png", Data: good}
	}
	res, err = result(t.Context(), "t", &sdk.CallToolResult{Content: many})
	if err != nil || len(res.Images) != MaxResultImages ||
		!strings.Contains(res.Content, fmt.Sprintf("not shown to the model: a result passes at most %d images", MaxResultImages)) {
		t.Fatalf("%d images: %d passed, %v\n%s", len(many), len(res.Images), err, res.Content)
	}
}
