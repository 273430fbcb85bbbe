package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// DefaultLimit is the size limit of configuration files: 1 MiB.
const DefaultLimit = 1 << 20

// ErrNotRegular is returned for a path that is not a regular file (after
// following symlinks): a FIFO, a device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned for a file larger than the limit.
var ErrTooLarge = errors.New("file too large")

// ReadRegular returns the contents of the regular file at path, at most
// limit bytes. A path that does not exist returns an error satisfying
// errors.Is(err, fs.ErrNotExist); one that is not a regular file
// returns ErrNotRegular; one larger than limit returns ErrTooLarge,
// without reading it. The file is opened with O_NONBLOCK and checked
// with fstat before any read, so a FIFO swapped in after the first check
// cannot block the call.
func ReadRegular(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := check(path, st, limit); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err = f.Stat()
	if err != nil {
		return nil, err
	}
	if err := check(path, st, limit); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: it grew past %d bytes while being read", path, ErrTooLarge, limit)
	}
	return b, nil
}

func check(path string, st os.FileInfo, limit int64) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (it is %s)", path, ErrNotRegular, kind(st.Mode()))
	}
	if st.Size() > limit {
		return fmt.Errorf("%s: %w: %d bytes; the limit is %d", path, ErrTooLarge, st.Size(), limit)
	}
	return nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a plain file"
}

// ReadHead returns at most limit bytes of the regular file name, opened
// through root (so that nothing outside it, a symlink out included, is
// followed) or, with a nil root, as a path, and whether the file was
// longer. Like ReadRegular it never blocks on opening and refuses what
// is not a regular file (ErrNotRegular); unlike it, a larger file is
// cut, not refused.
func ReadHead(root *os.Root, name string, limit int64) ([]byte, bool, error) {
	const flags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
	var (
		f   *os.File
		err error
	)
	if root != nil {
		f, err = root.OpenFile(name, flags, 0)
	} else {
		f, err = os.OpenFile(name, flags, 0)
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("%s: %w (it is %s)", name, ErrNotRegular, kind(st.Mode()))
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(b)) > limit {
		return b[:limit], true, nil
	}
	return b, false, nil
}
