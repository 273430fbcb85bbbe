package images

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"testing"
)

// chunk encodes a PNG chunk, its CRC right unless bad.
func chunk(typ string, body []byte, bad bool) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	out = append(out, typ...)
	out = append(out, body...)
	sum := crc32.ChecksumIEEE(append([]byte(typ), body...))
	if bad {
		sum++
	}
	return binary.BigEndian.AppendUint32(out, sum)
}

// withChunk inserts c after the IHDR of a PNG.
func withChunk(p, c []byte) []byte {
	at := len(pngMagic) + 12 + 13
	return append(append(append([]byte{}, p[:at]...), c...), p[at:]...)
}

func tinyPNG(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 3))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDropDamagedPNGChunks: an ancillary chunk with a wrong CRC (which
// Go's decoder refuses) is dropped and the image then passes Check; a
// damaged critical chunk, a good PNG and what is not a PNG are kept as
// they are.
func TestDropDamagedPNGChunks(t *testing.T) {
	good := tinyPNG(t)
	damaged := withChunk(good, chunk("iCCP", []byte("profile\x00\x00junk"), true))
	if _, err := Check(t.Context(), damaged, PNG, DefaultLimits()); err == nil {
		t.Fatal("Check took a PNG with a damaged chunk: the test proves nothing")
	}
	fixed, dropped := DropDamagedPNGChunks(damaged)
	if len(dropped) != 1 || dropped[0] != "iCCP" || !bytes.Equal(fixed, good) {
		t.Fatalf("dropped %q, fixed equals the original %v", dropped, bytes.Equal(fixed, good))
	}
	if _, err := Check(context.Background(), fixed, PNG, DefaultLimits()); err != nil {
		t.Fatalf("the repaired PNG: %v", err)
	}
	kept := withChunk(good, chunk("tEXt", []byte("k\x00v"), false))
	for name, in := range map[string][]byte{
		"a good PNG":              kept,
		"a damaged critical":      withChunk(good, chunk("PLTE", []byte{1, 2, 3}, true)),
		"not a PNG":               []byte("GIF89a"),
		"a chunk past the end":    good[:len(good)-3],
		"a damaged chunk cut off": damaged[:len(pngMagic)+12+13+10],
	} {
		out, dropped := DropDamagedPNGChunks(in)
		if dropped != nil || !bytes.Equal(out, in) {
			t.Errorf("%s: dropped %q, changed %v", name, dropped, !bytes.Equal(out, in))
		}
	}
}

func FuzzDropDamagedPNGChunks(f *testing.F) {
	good := tinyPNG(f)
	f.Add(good)
	f.Add(withChunk(good, chunk("iCCP", []byte("x"), true)))
	f.Add([]byte("\x89PNG\r\n\x1a\n\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := bytes.Clone(data)
		out, dropped := DropDamagedPNGChunks(data)
		if !bytes.Equal(in, data) {
			t.Fatal("the input was modified")
		}
		if len(dropped) == 0 && !bytes.Equal(out, data) || len(out) > len(data) {
			t.Fatalf("out of %d bytes from %d, dropped %q", len(out), len(data), dropped)
		}
		if again, more := DropDamagedPNGChunks(out); len(more) != 0 || !bytes.Equal(again, out) {
			t.Fatalf("a second pass dropped %q", more)
		}
	})
}
