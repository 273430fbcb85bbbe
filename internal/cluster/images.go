package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metis-agent/metis/internal/store"
)

// Images travel beside the log, not in it: an image may be 5 MB (more
// if the user raised the limit) and a message ten of them, while a NATS
// message is bounded by the server's max_payload (1 MB by default, and
// users run their own servers). So a group's store.PutImages is
// published without the bytes: before the record goes out, the owner
// puts each image in a JetStream object store bucket (which chunks
// objects into small messages) named by its SHA-256, and a projection
// gets them from there before it applies the record. The name is the
// content's hash, so a put is idempotent, two owners putting the same
// image agree, and a reader checks what it got against the name.

// DefaultImageBucket is the object store bucket of the images (its
// stream is OBJ_METIS_IMAGES).
const DefaultImageBucket = "METIS_IMAGES"

// maxImageSize bounds what a reader takes from the bucket for one
// image.
const maxImageSize = 256 << 20

// Image fetching by a projection: each image is tried imageAttempts
// times, each attempt bounded by imageTimeout, imageRetry apart.
const (
	imageAttempts = 4
	imageTimeout  = 30 * time.Second
	imageRetry    = time.Second
)

// ErrImageMissing is wrapped by the error of an image the bucket does
// not hold (or holds with other bytes than its name says).
var ErrImageMissing = errors.New("cluster: image not in the bucket")

// imageBucket is the images' object store.
type imageBucket struct {
	obj jetstream.ObjectStore
	ttl time.Duration // the bucket's TTL: a put refreshes an object older than half of it
}

// openImages creates the bucket, or updates its configuration. Objects
// live as long as the log's catalog events (retention): an image is
// put again when a record refers to it and its object is older than
// half of that, so a record the log still holds finds its images.
func openImages(ctx context.Context, js jetstream.JetStream, name string, replicas int, retention time.Duration) (*imageBucket, error) {
	cfg := jetstream.ObjectStoreConfig{
		Bucket:      name,
		Description: "metis images by SHA-256 (the bytes of the log's put_images ops)",
		TTL:         retention,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
	obj, err := whilePlacing(ctx, func() (jetstream.ObjectStore, error) {
		o, err := js.CreateObjectStore(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			return js.UpdateObjectStore(ctx, cfg)
		}
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: image bucket %s: %w", name, err)
	}
	return &imageBucket{obj: obj, ttl: retention}, nil
}

// put stores the bytes of the images that carry them, unless the
// bucket holds a recent enough copy already.
func (b *imageBucket) put(ctx context.Context, ims []store.Image) error {
	for _, im := range ims {
		if len(im.Data) == 0 {
			continue
		}
		if err := checkImage(im.SHA256, im.Data); err != nil {
			return fmt.Errorf("cluster: put image: %w", err)
		}
		info, err := b.obj.GetInfo(ctx, im.SHA256)
		switch {
		case err == nil && !info.Deleted && info.Size == uint64(len(im.Data)) && time.Since(info.ModTime) < b.ttl/2:
			continue
		case err != nil && !errors.Is(err, jetstream.ErrObjectNotFound):
			return fmt.Errorf("cluster: image %s: %w", im.SHA256, err)
		}
		if _, err := b.obj.PutBytes(ctx, im.SHA256, im.Data); err != nil {
			return fmt.Errorf("cluster: put image %s: %w", im.SHA256, err)
		}
	}
	return nil
}

// get returns the bytes of an image, checked against its SHA-256. An
// image the bucket does not hold, or holds with other bytes or more
// than maxImageSize, is an error wrapping ErrImageMissing.
func (b *imageBucket) get(ctx context.Context, sha string) ([]byte, error) {
	info, err := b.obj.GetInfo(ctx, sha)
	if errors.Is(err, jetstream.ErrObjectNotFound) || err == nil && info.Deleted {
		return nil, fmt.Errorf("%w: %s", ErrImageMissing, sha)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: image %s: %w", sha, err)
	}
	if info.Size > maxImageSize {
		return nil, fmt.Errorf("%w: %s holds %d bytes", ErrImageMissing, sha, info.Size)
	}
	data, err := b.obj.GetBytes(ctx, sha)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrImageMissing, sha)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: get image %s: %w", sha, err)
	}
	if err := checkImage(sha, data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImageMissing, err)
	}
	return data, nil
}

// checkImage checks that data hashes to sha.
func checkImage(sha string, data []byte) error {
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != sha {
		return fmt.Errorf("image %s: its bytes hash to %x", sha, sum)
	}
	return nil
}

// validSHA256 reports whether s is a SHA-256 as images are named by: 64
// lowercase hex digits.
func validSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// PutImages stores the bytes of the images in ops (store.PutImages) in
// the image bucket; a catalog publish does it before it sends the
// record, which holds none of them.
func (l *Log) PutImages(ctx context.Context, ops []store.Op) error {
	for _, op := range ops {
		if p, ok := op.(store.PutImages); ok {
			if err := l.images.put(ctx, p.Images); err != nil {
				return err
			}
		}
	}
	return nil
}

// Image returns the bytes of an image from the bucket, checked against
// its SHA-256 (ErrImageMissing if the bucket does not hold it).
func (l *Log) Image(ctx context.Context, sha string) ([]byte, error) {
	if !validSHA256(sha) {
		return nil, fmt.Errorf("%w: %q is not an image name", ErrImageMissing, sha)
	}
	return l.images.get(ctx, sha)
}
