package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metis-agent/metis/internal/store"
)

// imageReader is a projection store that can say which images it holds
// already (store.Store does): their bytes are taken from it rather than
// from the bucket.
type imageReader interface {
	ImageData(ctx context.Context, sha string) ([]byte, error)
}

// getImages gives the store.PutImages ops of a batch the bytes of their
// images, which records carry without them (images.go): from the
// node's store when it holds them, from the image bucket otherwise. It
// runs before the batch is submitted, outside the store's transaction,
// each get bounded by imageTimeout and tried imageAttempts times. An
// image it cannot get is left out of its op (logged, and counted by
// LostImages): the session's message then refers to an image this node
// cannot serve, which is better than a projection that stops for good.
// It fails only when ctx ends.
func (p *Projection) getImages(ctx context.Context, batch []Entry) error {
	got := map[string][]byte{}
	for i := range batch {
		e := &batch[i]
		for k, op := range e.Ops {
			put, ok := op.(store.PutImages)
			if !ok {
				continue
			}
			kept := make([]store.Image, 0, len(put.Images))
			for _, im := range put.Images {
				if len(im.Data) == 0 {
					data, err := p.image(ctx, got, im.SHA256)
					if err != nil {
						if ctx.Err() != nil {
							return context.Cause(ctx)
						}
						p.lost.Add(1)
						p.logger.Error("cluster: projection applies a message without its image", "seq", e.Seq, "event", e.Event.ID,
							"session", put.SessionID, "image", im.SHA256, "err", err)
						continue
					}
					im.Data = data
				}
				kept = append(kept, im)
			}
			put.Images = kept
			e.Ops[k] = put
		}
	}
	return nil
}

// image returns the bytes of one image, from got (the images of this
// batch so far), the store, or the bucket.
func (p *Projection) image(ctx context.Context, got map[string][]byte, sha string) ([]byte, error) {
	if data, ok := got[sha]; ok {
		return data, nil
	}
	if r, ok := p.st.(imageReader); ok {
		if data, err := r.ImageData(ctx, sha); err == nil && len(data) > 0 {
			got[sha] = data
			return data, nil
		}
	}
	var err error
	for attempt := range imageAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(imageRetry << (attempt - 1)):
			}
		}
		actx, cancel := context.WithTimeout(ctx, imageTimeout)
		var data []byte
		data, err = p.log.Image(actx, sha)
		cancel()
		if err == nil {
			got[sha] = data
			return data, nil
		}
		if errors.Is(err, ErrImageMissing) || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("cluster: image %s: %w", sha, err)
}
