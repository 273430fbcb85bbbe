package tool

import (
	"encoding/binary"
	"io/fs"
	"os"
	"syscall"
)

// readDirents lists the directory open as d with each entry's type as
// getdents reports it, without a stat per entry (os.File.ReadDir stats
// every entry of a directory opened through an os.Root). Only names are
// read from the descriptor, so confinement is the os.Root's that opened
// it. An entry of unknown type (some file systems) is stat'ed through
// root.
func readDirents(d *os.File, root *os.Root) ([]dirent, error) {
	rc, err := d.SyscallConn()
	if err != nil {
		return nil, err
	}
	var out []dirent
	buf := make([]byte, 32<<10)
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = syscall.ReadDirent(int(fd), buf)
			return true
		}); err != nil {
			return out, err
		}
		if rerr != nil {
			return out, rerr
		}
		if n <= 0 {
			return out, nil
		}
		// linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				break
			}
			ino := binary.NativeEndian.Uint64(buf[off:])
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			off += reclen
			if ino == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			e := dirent{name: string(name)}
			switch typ {
			case syscall.DT_DIR:
				e.typ = fs.ModeDir
			case syscall.DT_REG:
				e.typ = 0
			case syscall.DT_LNK:
				e.typ = fs.ModeSymlink
			case syscall.DT_UNKNOWN:
				fi, err := root.Lstat(e.name)
				if err != nil {
					continue
				}
				e.typ = fi.Mode().Type()
			default:
				e.typ = fs.ModeIrregular
			}
			out = append(out, e)
		}
	}
}
