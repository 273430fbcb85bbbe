package tool

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/message"
)

// readImage returns the image read_file found at display (its first
// bytes are an image's magic): checked by content like an image a user
// sends (images.Check, the default limits), as the result's image, with
// a line of text saying what it is. The agent loop stores it once by
// its SHA-256 and sends it to a model that sees images; a model that
// does not reads a line of text in its place (docs/conversation.md).
func readImage(ctx context.Context, r io.Reader, display string, size int64) (Result, error) {
	lim := images.DefaultLimits()
	if size > lim.MaxBytes {
		return Result{}, Errorf(ClassInvalidInput, "read %s: an image of %d bytes; read_file returns images of at most %d", display, size, lim.MaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(r, lim.MaxBytes+1))
	if err != nil {
		return Result{}, fsError("read", display, err)
	}
	info, err := images.Check(ctx, data, images.Sniff(data), lim)
	if err != nil {
		var ie *images.Error
		if errors.As(err, &ie) {
			return Result{}, Errorf(ClassInvalidInput, "read %s: the image cannot be used: %s", display, ie.Message)
		}
		return Result{}, err
	}
	desc := images.Describe(info.MediaType, info.Width, info.Height, info.Size)
	b := message.Image(info.MediaType, info.SHA256, info.Size, info.Width, info.Height)
	b.Data = data
	return Result{Content: fmt.Sprintf("The image %s (%s) is attached.", display, desc),
		Summary: fmt.Sprintf("read image %s (%s)", display, desc), Images: []message.Block{b}}, nil
}
