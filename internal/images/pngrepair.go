package images

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
)

// pngMagic opens every PNG file.
var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// DropDamagedPNGChunks returns a PNG without its ancillary chunks whose
// CRC does not match (a damaged colour profile, text or metadata chunk
// that does not change the pixels), as libpng and browsers skip them,
// and the types of the chunks dropped. Data that is not a PNG, whose
// chunks do not parse, or whose damaged chunk is a critical one (IHDR,
// PLTE, IDAT, IEND), is returned as it is with none dropped: Check
// then refuses it. The data is never modified in place.
func DropDamagedPNGChunks(data []byte) ([]byte, []string) {
	if !bytes.HasPrefix(data, pngMagic) {
		return data, nil
	}
	var (
		out     []byte
		dropped []string
	)
	for i := len(pngMagic); i < len(data); {
		if len(data)-i < 12 {
			return data, nil
		}
		n := binary.BigEndian.Uint32(data[i:])
		if uint64(n) > uint64(len(data)-i-12) {
			return data, nil
		}
		end := i + 12 + int(n)
		typ := data[i+4 : i+8]
		sum := binary.BigEndian.Uint32(data[end-4:])
		if crc32.ChecksumIEEE(data[i+4:end-4]) != sum {
			if typ[0]&0x20 == 0 { // a critical chunk
				return data, nil
			}
			if out == nil {
				out = append(make([]byte, 0, len(data)), data[:i]...)
			}
			dropped = append(dropped, string(typ))
		} else if out != nil {
			out = append(out, data[i:end]...)
		}
		i = end
	}
	if out == nil {
		return data, nil
	}
	return out, dropped
}
