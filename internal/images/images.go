// Package images owns what metis accepts as an image (docs/conversation.md,
// "Images"): PNG, JPEG, GIF and WebP, told by their content (the magic
// bytes, then a real decode), never by a name or a claimed type; the
// limits an image must keep (bytes, pixels a side, pixels in all,
// checked from the header before anything is decoded whole); how an
// image is described to a model that cannot see it and how many tokens
// it counts for; and a cache of image bytes keyed by content (SHA-256),
// never by a path.
//
// images imports only the standard library and golang.org/x/image/webp
// (the WebP decoder the standard library lacks).
package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"strings"

	"golang.org/x/image/webp"
)

// Media types metis accepts.
const (
	PNG  = "image/png"
	JPEG = "image/jpeg"
	GIF  = "image/gif"
	WebP = "image/webp"
)

// Limits bound what Check accepts.
type Limits struct {
	// MaxBytes bounds the encoded image.
	MaxBytes int64
	// MaxSide bounds its width and its height, in pixels.
	MaxSide int
	// MaxPixels bounds width × height: what a full decode allocates
	// grows with it (a decompression bomb is a small file with a huge
	// header), so it is checked from the header first.
	MaxPixels int64
}

// Defaults of the limits: 5 MiB (Anthropic's per-image limit), 8000
// pixels a side (Anthropic's), and 33,177,600 pixels (7680 × 4320).
const (
	DefaultMaxBytes  = 5 << 20
	DefaultMaxSide   = 8000
	DefaultMaxPixels = 7680 * 4320
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{MaxBytes: DefaultMaxBytes, MaxSide: DefaultMaxSide, MaxPixels: DefaultMaxPixels}
}

// Info is what Check found: the image's true media type, size in
// pixels and bytes, and the SHA-256 of its bytes (lower-case hex), its
// name in the store.
type Info struct {
	MediaType     string
	Width, Height int
	Size          int64
	SHA256        string
}

// Reasons an image is refused (Error.Reason).
const (
	ReasonEmpty       = "empty"
	ReasonTooLarge    = "too_large"
	ReasonUnsupported = "unsupported"
	ReasonMismatch    = "type_mismatch"
	ReasonTruncated   = "truncated"
	ReasonDimensions  = "too_many_pixels"
	ReasonCorrupt     = "corrupt"
)

// Error is a refused image: Reason is one of the Reason constants, the
// message says what was wrong in words a user can act on.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Message }

func refuse(reason, format string, args ...any) error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Sniff returns the media type the data's first bytes announce, or ""
// when they announce none of the four formats.
func Sniff(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return PNG
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return JPEG
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return GIF
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return WebP
	}
	return ""
}

// Supported reports whether mediaType is one metis accepts.
func Supported(mediaType string) bool {
	switch mediaType {
	case PNG, JPEG, GIF, WebP:
		return true
	}
	return false
}

// decodeSlot serialises full decodes: each may allocate up to
// MaxPixels × 8 bytes (a 16-bit RGBA PNG), so two at once would double
// the server's peak memory for nothing.
var decodeSlot = make(chan struct{}, 1)

// Check validates an image by its content and returns what it is.
// claimed is the media type the client said it sends; it must name the
// format the bytes are in (a PNG sent as image/jpeg is refused, as is a
// file renamed to look like another). The checks, in order: the size in
// bytes; the magic bytes; the claim; that the file is whole (a PNG or
// JPEG is decoded to its end, a GIF must end with its trailer, a WebP's
// RIFF size must match); the dimensions from the header (each side at
// most MaxSide, width × height at most MaxPixels), before any pixel is
// decoded; then a full decode, which must agree with the header. Every
// refusal is an *Error. ctx bounds the wait for the decoder.
func Check(ctx context.Context, data []byte, claimed string, lim Limits) (Info, error) {
	if len(data) == 0 {
		return Info{}, refuse(ReasonEmpty, "the image is empty")
	}
	if lim.MaxBytes > 0 && int64(len(data)) > lim.MaxBytes {
		return Info{}, refuse(ReasonTooLarge, "the image is %d bytes; the limit is %d", len(data), lim.MaxBytes)
	}
	kind := Sniff(data)
	if kind == "" {
		return Info{}, refuse(ReasonUnsupported, "the data is not a PNG, JPEG, GIF or WebP image")
	}
	claimed = strings.ToLower(strings.TrimSpace(claimed))
	switch {
	case claimed == "":
		return Info{}, refuse(ReasonMismatch, "media_type is required (image/png, image/jpeg, image/gif or image/webp)")
	case !Supported(claimed):
		return Info{}, refuse(ReasonUnsupported, "media_type %q is not accepted; send image/png, image/jpeg, image/gif or image/webp", claimed)
	case claimed != kind:
		return Info{}, refuse(ReasonMismatch, "media_type says %s but the data is %s", claimed, Name(kind))
	}
	if err := whole(kind, data); err != nil {
		return Info{}, err
	}
	cfg, err := decodeConfig(kind, data)
	if err != nil {
		return Info{}, refuse(ReasonCorrupt, "the %s header does not decode: %v", Name(kind), err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Info{}, refuse(ReasonCorrupt, "the %s header says %d×%d pixels", Name(kind), cfg.Width, cfg.Height)
	}
	if lim.MaxSide > 0 && (cfg.Width > lim.MaxSide || cfg.Height > lim.MaxSide) {
		return Info{}, refuse(ReasonDimensions, "the image is %d×%d pixels; each side may be at most %d", cfg.Width, cfg.Height, lim.MaxSide)
	}
	if lim.MaxPixels > 0 && int64(cfg.Width)*int64(cfg.Height) > lim.MaxPixels {
		return Info{}, refuse(ReasonDimensions, "the image is %d×%d = %d pixels; the limit is %d", cfg.Width, cfg.Height,
			int64(cfg.Width)*int64(cfg.Height), lim.MaxPixels)
	}
	select {
	case decodeSlot <- struct{}{}:
	case <-ctx.Done():
		return Info{}, fmt.Errorf("images: wait for the decoder: %w", ctx.Err())
	}
	img, err := decode(kind, data)
	<-decodeSlot
	if err != nil {
		reason := ReasonCorrupt
		if errors.Is(err, errUnexpectedEOF) || strings.Contains(err.Error(), "unexpected EOF") {
			reason = ReasonTruncated
		}
		return Info{}, refuse(reason, "the %s image does not decode: %v", Name(kind), err)
	}
	if b := img.Bounds(); b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return Info{}, refuse(ReasonCorrupt, "the %s header says %d×%d but the image is %d×%d", Name(kind), cfg.Width, cfg.Height, b.Dx(), b.Dy())
	}
	sum := sha256.Sum256(data)
	return Info{MediaType: kind, Width: cfg.Width, Height: cfg.Height, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, nil
}

var errUnexpectedEOF = errors.New("unexpected EOF")

// whole checks the parts of a format's structure that a decode of its
// first frame would not: a GIF ends with its trailer (0x3B), a WebP's
// RIFF size covers exactly the data. PNG and JPEG are decoded to their
// end, which finds a truncation.
func whole(kind string, data []byte) error {
	switch kind {
	case GIF:
		if data[len(data)-1] != 0x3B {
			return refuse(ReasonTruncated, "the GIF image is truncated: it does not end with the GIF trailer")
		}
	case WebP:
		size := int64(binary.LittleEndian.Uint32(data[4:8])) + 8
		if size != int64(len(data)) && size != int64(len(data))-1 { // a padding byte may follow an odd size
			if size > int64(len(data)) {
				return refuse(ReasonTruncated, "the WebP image is truncated: its header says %d bytes, %d arrived", size, len(data))
			}
			return refuse(ReasonCorrupt, "the WebP image's header says %d bytes but %d arrived", size, len(data))
		}
	}
	return nil
}

func decodeConfig(kind string, data []byte) (image.Config, error) {
	r := bytes.NewReader(data)
	switch kind {
	case PNG:
		return png.DecodeConfig(r)
	case JPEG:
		return jpeg.DecodeConfig(r)
	case GIF:
		return gif.DecodeConfig(r)
	default:
		return webp.DecodeConfig(r)
	}
}

func decode(kind string, data []byte) (image.Image, error) {
	r := bytes.NewReader(data)
	switch kind {
	case PNG:
		return png.Decode(r)
	case JPEG:
		return jpeg.Decode(r)
	case GIF:
		return gif.Decode(r)
	default:
		return webp.Decode(r)
	}
}

// Name is a media type's short name: PNG, JPEG, GIF, WebP (or the type
// itself for another).
func Name(mediaType string) string {
	switch mediaType {
	case PNG:
		return "PNG"
	case JPEG:
		return "JPEG"
	case GIF:
		return "GIF"
	case WebP:
		return "WebP"
	}
	return mediaType
}

// Describe says what an image is in a few words: "PNG 32×32, 1.2 KB".
func Describe(mediaType string, width, height int, size int64) string {
	return fmt.Sprintf("%s %d×%d, %s", Name(mediaType), width, height, humanBytes(size))
}

func humanBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f KB", float64(n)/1000)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1000/1000)
}

// Stub is the text a model that cannot see images reads in place of
// one.
func Stub(mediaType string, width, height int, size int64, why string) string {
	return fmt.Sprintf("[an image was left out (%s): %s]", Describe(mediaType, width, height, size), why)
}

// Token estimation: providers scale an image down to fit about 1.15
// megapixels and 1568 pixels on its long side, then count about one
// token per 750 pixels (Anthropic's published rule; OpenAI's tiles come
// to the same order). So an image counts for at most about 1,600
// tokens whatever its size.
const (
	tokenLongSide  = 1568
	tokenMaxPixels = 1_150_000
	pixelsPerToken = 750
)

// Tokens estimates what an image of width × height counts for in a
// model's context.
func Tokens(width, height int) int {
	if width <= 0 || height <= 0 {
		return 0
	}
	w, h := float64(width), float64(height)
	if long := max(w, h); long > tokenLongSide {
		w, h = w*tokenLongSide/long, h*tokenLongSide/long
	}
	if px := w * h; px > tokenMaxPixels {
		s := tokenMaxPixels / px
		w, h = w*math.Sqrt(s), h*math.Sqrt(s)
	}
	return int(w*h/pixelsPerToken) + 1
}
