package agent

import (
	"context"

	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
)

// Images in a model call (docs/conversation.md, "Images"): the stored
// conversation holds references (media type, SHA-256, size); before a
// call the loop gives each image its bytes, read through a cache keyed
// by the SHA-256, or, for a model that cannot see, a one-line text in
// its place. The stored messages are never changed.

// ImageSource reads an image's bytes by its SHA-256 (the store).
type ImageSource interface {
	ImageData(ctx context.Context, sha string) ([]byte, error)
}

// DefaultImageCacheBytes bounds the image bytes kept between calls.
const DefaultImageCacheBytes = 64 << 20

// Why an image is left out of a call.
const (
	whyBlind   = "this model does not take images"
	whyMissing = "its bytes are no longer stored"
)

// withImages returns msgs (a request's view, shared with the stored
// conversation) with their images ready to send: bytes attached when the
// model sees, text stubs otherwise. Messages without images are
// returned as they are; the others are copied, never changed in place.
func (l *Loop) withImages(ctx context.Context, msgs []message.Message, sees bool) []message.Message {
	for i, m := range msgs {
		if len(m.Images()) == 0 {
			continue
		}
		content := make([]message.Block, 0, len(m.Content))
		for _, b := range m.Content {
			switch {
			case b.Type == message.BlockImage:
				content = append(content, l.imageBlock(ctx, b, sees))
			case b.Type == message.BlockToolResult && len(b.Images) > 0:
				imgs := make([]message.Block, 0, len(b.Images))
				for _, im := range b.Images {
					if x := l.imageBlock(ctx, im, sees); x.Type == message.BlockImage {
						imgs = append(imgs, x)
					} else {
						b.Content += "\n" + x.Text
					}
				}
				b.Images = imgs
				content = append(content, b)
			default:
				content = append(content, b)
			}
		}
		m.Content = content
		msgs[i] = m
	}
	return msgs
}

// imageBlock returns image block b with its bytes, or the text a model
// reads in its place.
func (l *Loop) imageBlock(ctx context.Context, b message.Block, sees bool) message.Block {
	if !sees {
		return message.Text(images.Stub(b.MediaType, b.Width, b.Height, b.Size, whyBlind))
	}
	data, ok := l.images.Get(b.SHA256)
	if !ok {
		var err error
		if l.cfg.Images != nil {
			data, err = l.cfg.Images.ImageData(ctx, b.SHA256)
		}
		if l.cfg.Images == nil || err != nil || len(data) == 0 {
			l.cfg.Logger.Warn("an image of the conversation could not be read", "sha256", b.SHA256, "err", err)
			return message.Text(images.Stub(b.MediaType, b.Width, b.Height, b.Size, whyMissing))
		}
		l.images.Put(b.SHA256, data)
	}
	b.Data = data
	return b
}

// storeImages returns the op that stores the images of a tool result
// (read_file of an image) with the session, and takes their bytes out
// of the block (the stored message refers to them by SHA-256); the
// bytes stay in the cache for the next call.
func (r *run) storeImages(b *message.Block) []store.Op {
	if len(b.Images) == 0 {
		return nil
	}
	imgs := make([]message.Block, len(b.Images))
	var put []store.Image
	for i, im := range b.Images {
		if len(im.Data) > 0 {
			put = append(put, store.Image{SHA256: im.SHA256, MediaType: im.MediaType, Size: im.Size, Width: im.Width, Height: im.Height, Data: im.Data})
			r.images.Put(im.SHA256, im.Data)
		}
		im.Data = nil
		imgs[i] = im
	}
	b.Images = imgs
	if len(put) == 0 {
		return nil
	}
	return []store.Op{store.PutImages{SessionID: r.t.SessionID, Images: put}}
}
