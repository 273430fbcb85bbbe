package session

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// DefaultMaxImages bounds the images of one message unless configured.
const DefaultMaxImages = 10

// checkImages validates a message's images by content (images.Check)
// and returns their blocks and, once each, their bytes to store. Any
// refusal is an ErrInvalidImage naming the image (from 1).
func (m *Manager) checkImages(ctx context.Context, in []protocol.ImageInput) ([]message.Block, []store.Image, error) {
	if len(in) > m.cfg.MaxImages {
		return nil, nil, fmt.Errorf("%w: %d images; a message may hold at most %d", ErrInvalidImage, len(in), m.cfg.MaxImages)
	}
	var (
		blocks []message.Block
		stored []store.Image
		seen   = map[string]bool{}
	)
	for i, im := range in {
		info, err := images.Check(ctx, im.Data, im.MediaType, m.cfg.Images)
		if err != nil {
			var ie *images.Error
			if errors.As(err, &ie) {
				return nil, nil, fmt.Errorf("%w: image %d: %s", ErrInvalidImage, i+1, ie.Message)
			}
			return nil, nil, err
		}
		blocks = append(blocks, message.Image(info.MediaType, info.SHA256, info.Size, info.Width, info.Height))
		if !seen[info.SHA256] {
			seen[info.SHA256] = true
			stored = append(stored, store.Image{SHA256: info.SHA256, MediaType: info.MediaType, Size: info.Size,
				Width: info.Width, Height: info.Height, Data: im.Data})
		}
	}
	return blocks, stored, nil
}

// ImageLimits returns how many images a message may hold and the most
// bytes each may have (the HTTP API sizes its body limit from them).
func (m *Manager) ImageLimits() (count int, bytes int64) {
	return m.cfg.MaxImages, m.cfg.Images.MaxBytes
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Image returns an image of a session by its SHA-256 (lower-case hex):
// only an image the session's messages hold (sent with a turn, or read
// by a tool) is served. ErrNotFound for an unknown session,
// ErrImageNotFound for anything else.
func (m *Manager) Image(ctx context.Context, sessionID, sha string) (store.Image, error) {
	if _, err := m.session(ctx, sessionID); err != nil {
		return store.Image{}, err
	}
	if !sha256Hex.MatchString(sha) {
		return store.Image{}, fmt.Errorf("%w: %q is not a SHA-256 in lower-case hex", ErrImageNotFound, sha)
	}
	im, err := m.cfg.Store.SessionImage(ctx, sessionID, sha)
	if errors.Is(err, store.ErrNotFound) {
		return store.Image{}, fmt.Errorf("%w: %s in session %s", ErrImageNotFound, sha, sessionID)
	}
	return im, err
}
