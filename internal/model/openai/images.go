package openai

import (
	"encoding/base64"

	sdk "github.com/openai/openai-go/v3"

	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/message"
)

// imagePart converts an image block (its bytes attached by the agent
// loop) to an image_url content part holding a data URL, or, without
// its bytes, to the text that replaces it.
func imagePart(b message.Block) sdk.ChatCompletionContentPartUnionParam {
	if len(b.Data) == 0 {
		return sdk.TextContentPart(images.Stub(b.MediaType, b.Width, b.Height, b.Size, "its bytes were not available"))
	}
	return sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{
		URL: "data:" + b.MediaType + ";base64," + base64.StdEncoding.EncodeToString(b.Data)})
}
