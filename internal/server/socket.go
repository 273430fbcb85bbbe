package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// MaxSocketPath is the longest path a unix socket may have on this
// system: the kernel's sockaddr_un holds it with a terminating NUL (108
// bytes on Linux, 104 on macOS).
const MaxSocketPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// staleDialTimeout bounds the connect that tells a live socket from a
// stale one.
const staleDialTimeout = time.Second

// umaskMu serializes the umask changes of this process around a bind.
var umaskMu sync.Mutex

// unixSocket is the server's unix socket: the listener and the identity
// of the file it created, so that shutdown removes that file and never
// one another server put there since.
type unixSocket struct {
	path string
	ln   *net.UnixListener
	dev  uint64
	ino  uint64
}

// listenUnix creates the server's unix socket at path, safely:
//   - the path fits in a sockaddr_un (MaxSocketPath), else a clear
//     error;
//   - its directory belongs to this user and nobody else may write to
//     it, so nobody can replace the socket under the clients;
//   - an existing file that is not a socket is left alone and refused;
//     an existing socket is dialed first: one that answers belongs to a
//     live server and is never taken over (a clear error); one nobody
//     answers on is stale and removed. The check, the removal and the
//     bind run under an flock(2) of the directory, so two servers
//     starting together cannot both take the same stale path;
//   - the socket is bound with umask 0177, so it is mode 0600 from the
//     first instant (no window between bind and chmod).
func listenUnix(path string) (*unixSocket, error) {
	if len(path) > MaxSocketPath {
		return nil, fmt.Errorf("unix socket %s: the path is %d bytes, and a unix socket path may have at most %d here: give a shorter one with --socket, or --socket=off", path, len(path), MaxSocketPath)
	}
	dir := filepath.Dir(path)
	if err := checkSocketDir(dir); err != nil {
		return nil, fmt.Errorf("unix socket %s: %w", path, err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("unix socket %s: lock the directory: %w", path, err)
	}
	defer unlock()
	if err := clearStale(path); err != nil {
		return nil, err
	}
	ln, err := bindPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("unix socket %s: %w", path, err)
	}
	// Shutdown removes the file itself, and only if it is still the one
	// bound here.
	ln.SetUnlinkOnClose(false)
	st, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("unix socket %s: %w", path, err)
	}
	u := &unixSocket{path: path, ln: ln}
	u.dev, u.ino = fileID(st)
	if st.Mode().Perm()&0o077 != 0 {
		u.close()
		return nil, fmt.Errorf("unix socket %s: created with mode %s, not 0600", path, unixMode(st.Mode()))
	}
	return u, nil
}

// checkSocketDir refuses a socket directory that is missing, not a
// directory, not this user's, or writable by group or others.
func checkSocketDir(dir string) error {
	_, err := checkPrivateDir(dir, "who could replace the socket: chmod go-w it, or choose another with --socket")
	return err
}

// lockDir takes an exclusive flock(2) of dir and returns its release.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := flock(f, syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = flock(f, syscall.LOCK_UN)
		f.Close()
	}, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// clearStale makes path free for the bind: nothing there, or a stale
// socket (removed). A live socket or any other file is an error.
func clearStale(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unix socket %s: %w", path, err)
	}
	if st.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("unix socket %s: the path exists and is not a socket (%s); metis leaves it alone: move it away, or choose another path with --socket", path, describeMode(st.Mode()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), staleDialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err == nil {
		c.Close()
		return fmt.Errorf("unix socket %s: another server is answering on it (a metis serve already running on this home?); stop it first, or give this one another --socket (or --socket=off)", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
		// A socket we cannot tell is dead (the dial timed out: a server
		// that does not accept right now): never take it.
		return fmt.Errorf("unix socket %s: cannot tell whether a server owns it (%v); remove it yourself if none does", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unix socket %s: remove the stale socket: %w", path, err)
	}
	return nil
}

// bindPrivate listens on path with umask 0177, so the socket is created
// with mode 0600. The umask is per process: the change lasts only for
// the bind, under umaskMu.
func bindPrivate(path string) (*net.UnixListener, error) {
	umaskMu.Lock()
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	umaskMu.Unlock()
	return ln, err
}

// close closes the listener and removes the socket file if it is still
// the one this server created.
func (u *unixSocket) close() error {
	err := u.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if st, serr := os.Lstat(u.path); serr == nil && st.Mode().Type() == fs.ModeSocket {
		if dev, ino := fileID(st); dev == u.dev && ino == u.ino {
			if rerr := os.Remove(u.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
	}
	return err
}

func fileID(st fs.FileInfo) (dev, ino uint64) {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Dev), sys.Ino
	}
	return 0, 0
}

func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}
