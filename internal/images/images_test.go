package images_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/images"
)

// webpLossless and webpLossy are 1×1 WebP images (the standard library
// has no WebP encoder).
var (
	webpLossless, _ = base64.StdEncoding.DecodeString("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
	webpLossy, _    = base64.StdEncoding.DecodeString("UklGRiIAAABXRUJQVlA4IBYAAAAwAQCdASoBAAEADsD+JaQAA3AAAAAA")
)

func testImage(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x * 40), uint8(y * 40), 200, 255})
		}
	}
	return img
}

func encodePNG(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, testImage(w, h)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, testImage(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeGIF(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, testImage(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bomb rewrites a PNG's header to claim w×h pixels (its CRC fixed), so
// only a full decode would find the data does not match: a
// decompression bomb's shape.
func bomb(t testing.TB, w, h uint32) []byte {
	data := encodePNG(t, 2, 2)
	binary.BigEndian.PutUint32(data[16:20], w)
	binary.BigEndian.PutUint32(data[20:24], h)
	binary.BigEndian.PutUint32(data[29:33], crc32.ChecksumIEEE(data[12:29]))
	return data
}

func wantReason(t *testing.T, err error, reason string) {
	t.Helper()
	var ie *images.Error
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T), want an *images.Error with reason %s", err, err, reason)
	}
	if ie.Reason != reason {
		t.Errorf("reason %s (%s), want %s", ie.Reason, ie.Message, reason)
	}
}

func TestCheckAcceptsTheFourFormatsByContent(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, media string
		data        []byte
		w, h        int
	}{
		{"png", images.PNG, encodePNG(t, 5, 3), 5, 3},
		{"jpeg", images.JPEG, encodeJPEG(t, 4, 6), 4, 6},
		{"gif", images.GIF, encodeGIF(t, 2, 2), 2, 2},
		{"webp lossless", images.WebP, webpLossless, 1, 1},
		{"webp lossy", images.WebP, webpLossy, 1, 1},
	} {
		info, err := images.Check(ctx, c.data, c.media, images.DefaultLimits())
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if info.MediaType != c.media || info.Width != c.w || info.Height != c.h || info.Size != int64(len(c.data)) || len(info.SHA256) != 64 {
			t.Errorf("%s: %+v", c.name, info)
		}
		// The claimed type is matched case-insensitively.
		if _, err := images.Check(ctx, c.data, strings.ToUpper(c.media), images.DefaultLimits()); err != nil {
			t.Errorf("%s upper-case claim: %v", c.name, err)
		}
	}
}

func TestCheckRefusesALyingType(t *testing.T) {
	_, err := images.Check(context.Background(), encodePNG(t, 2, 2), images.JPEG, images.DefaultLimits())
	wantReason(t, err, images.ReasonMismatch)
	if !strings.Contains(err.Error(), "image/jpeg") || !strings.Contains(err.Error(), "PNG") {
		t.Errorf("message: %v", err)
	}
	// Text named like an image is no image.
	_, err = images.Check(context.Background(), []byte("just text, called shot.png"), images.PNG, images.DefaultLimits())
	wantReason(t, err, images.ReasonUnsupported)
	// A type metis does not take.
	_, err = images.Check(context.Background(), encodePNG(t, 2, 2), "image/svg+xml", images.DefaultLimits())
	wantReason(t, err, images.ReasonUnsupported)
	_, err = images.Check(context.Background(), encodePNG(t, 2, 2), "", images.DefaultLimits())
	wantReason(t, err, images.ReasonMismatch)
}

func TestCheckRefusesTruncatedImages(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]struct {
		media string
		data  []byte
	}{
		"png":  {images.PNG, encodePNG(t, 16, 16)},
		"jpeg": {images.JPEG, encodeJPEG(t, 16, 16)},
		"gif":  {images.GIF, encodeGIF(t, 16, 16)},
		"webp": {images.WebP, webpLossy},
	} {
		cut := c.data[:len(c.data)-len(c.data)/4]
		_, err := images.Check(ctx, cut, c.media, images.DefaultLimits())
		var ie *images.Error
		if !errors.As(err, &ie) || (ie.Reason != images.ReasonTruncated && ie.Reason != images.ReasonCorrupt) {
			t.Errorf("%s cut to %d of %d bytes: %v", name, len(cut), len(c.data), err)
		}
	}
	_, err := images.Check(ctx, encodePNG(t, 16, 16)[:60], images.PNG, images.DefaultLimits())
	if err == nil {
		t.Fatal("a PNG cut in its data was accepted")
	}
}

func TestCheckRefusesADecompressionBombFromItsHeader(t *testing.T) {
	// 100,000 × 100,000 pixels claimed by a file of a few dozen bytes: the
	// header is read, the pixels never decoded.
	_, err := images.Check(context.Background(), bomb(t, 100000, 100000), images.PNG, images.DefaultLimits())
	wantReason(t, err, images.ReasonDimensions)
	// Within each side's limit but not the total.
	_, err = images.Check(context.Background(), bomb(t, 7999, 7999), images.PNG, images.DefaultLimits())
	wantReason(t, err, images.ReasonDimensions)
	allocs := testing.AllocsPerRun(5, func() {
		_, _ = images.Check(context.Background(), bomb(t, 30000, 30000), images.PNG, images.DefaultLimits())
	})
	if allocs > 200 {
		t.Errorf("refusing a bomb allocated %v times: it was decoded", allocs)
	}
}

func TestCheckRefusesAnImageOverTheByteLimit(t *testing.T) {
	data := encodePNG(t, 64, 64)
	_, err := images.Check(context.Background(), data, images.PNG, images.Limits{MaxBytes: int64(len(data) - 1)})
	wantReason(t, err, images.ReasonTooLarge)
	_, err = images.Check(context.Background(), nil, images.PNG, images.DefaultLimits())
	wantReason(t, err, images.ReasonEmpty)
}

func TestTokensAreBoundedWhateverTheSize(t *testing.T) {
	small, big := images.Tokens(100, 100), images.Tokens(8000, 8000)
	if small <= 0 || small >= big || big > 2000 {
		t.Errorf("tokens: 100×100 %d, 8000×8000 %d", small, big)
	}
}

// FuzzCheck: whatever the bytes and the claim, Check never panics, and
// what it accepts is one of the four formats, within the limits, with
// the claim it was given.
func FuzzCheck(f *testing.F) {
	f.Add(encodePNG(f, 3, 3), images.PNG)
	f.Add(encodeJPEG(f, 3, 3), images.JPEG)
	f.Add(encodeGIF(f, 3, 3), images.GIF)
	f.Add(webpLossless, images.WebP)
	f.Add(webpLossy, images.WebP)
	f.Add(bomb(f, 100000, 100000), images.PNG)
	f.Add([]byte("\x89PNG\r\n\x1a\n"), images.PNG)
	f.Add([]byte("RIFF\x00\x00\x00\x00WEBPVP8 "), images.WebP)
	lim := images.Limits{MaxBytes: 1 << 20, MaxSide: 512, MaxPixels: 512 * 512}
	f.Fuzz(func(t *testing.T, data []byte, claimed string) {
		info, err := images.Check(context.Background(), data, claimed, lim)
		if err != nil {
			var ie *images.Error
			if !errors.As(err, &ie) || ie.Message == "" {
				t.Fatalf("a refusal that is no *images.Error: %v", err)
			}
			return
		}
		if !images.Supported(info.MediaType) || info.MediaType != images.Sniff(data) {
			t.Fatalf("accepted as %q", info.MediaType)
		}
		if info.Width <= 0 || info.Height <= 0 || info.Width > lim.MaxSide || info.Height > lim.MaxSide {
			t.Fatalf("accepted %d×%d", info.Width, info.Height)
		}
	})
}

func ExampleCheck() {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 3)))
	info, err := images.Check(context.Background(), b.Bytes(), "image/png", images.DefaultLimits())
	if err != nil {
		panic(err)
	}
	fmt.Println(images.Describe(info.MediaType, info.Width, info.Height, info.Size))
	_, err = images.Check(context.Background(), b.Bytes(), "image/jpeg", images.DefaultLimits())
	fmt.Println(err)
	// Output:
	// PNG 4×3, 76 B
	// media_type says image/jpeg but the data is PNG
}
