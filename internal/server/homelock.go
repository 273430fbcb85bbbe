package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockFileName is the file in the home whose flock(2) a running server
// holds.
const lockFileName = "metis.lock"

// homeLock is a server's hold on its home directory: one server per
// home, whatever its --addr and --socket. The kernel releases it when
// the process ends, however it ends, so a crash leaves nothing stale.
type homeLock struct{ f *os.File }

// lockHome takes the home's lock, or says that another server holds it.
// It never waits.
func lockHome(home string) (*homeLock, error) {
	path := filepath.Join(home, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("home lock %s: %w", path, err)
	}
	if err := privateFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("home lock %s: %w", path, err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another metis server is running on the home %s (it holds %s); stop it first, or give this one another --home", home, path)
		}
		return nil, fmt.Errorf("home lock %s: %w", path, err)
	}
	return &homeLock{f: f}, nil
}

// release gives the home back (the file stays, unlocked).
func (l *homeLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = flock(l.f, syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// privateFile makes an open file of the home mode 0600 if group or
// others had any access to it (a file left by an older version, or
// created under a loose umask).
func privateFile(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 == 0 {
		return nil
	}
	return f.Chmod(0o600)
}
