package anthropic

import (
	"encoding/base64"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/message"
)

// Anthropic's limits on images (docs/conversation.md, "Images"): the
// base64 text of one image may be at most 5 MiB, and in a request
// holding more than 20 images each side may be at most 2000 pixels. An
// image past them is sent as a line of text saying so: the API would
// refuse the whole request, and, the image staying in the history,
// every later one.
const (
	maxBase64      = 5 << 20
	manyImages     = 20
	manyImagesSide = 2000
)

// countImages counts the images of a conversation, tool results'
// included.
func countImages(ms []message.Message) int {
	n := 0
	for i := range ms {
		n += len(ms[i].Images())
	}
	return n
}

// imageBlock converts an image block (its bytes attached by the agent
// loop) to a base64 image block, or to the text that replaces it.
func imageBlock(b message.Block, many bool) sdk.ContentBlockParamUnion {
	why := ""
	switch {
	case len(b.Data) == 0:
		why = "its bytes were not available"
	case base64.StdEncoding.EncodedLen(len(b.Data)) > maxBase64:
		why = fmt.Sprintf("Anthropic takes images of at most %d bytes in base64 (about 3.75 MB); resize it", maxBase64)
	case many && (b.Width > manyImagesSide || b.Height > manyImagesSide):
		why = fmt.Sprintf("in a conversation of more than %d images Anthropic takes at most %d pixels a side", manyImages, manyImagesSide)
	}
	if why != "" {
		return sdk.NewTextBlock(images.Stub(b.MediaType, b.Width, b.Height, b.Size, why))
	}
	return sdk.NewImageBlockBase64(b.MediaType, base64.StdEncoding.EncodeToString(b.Data))
}
