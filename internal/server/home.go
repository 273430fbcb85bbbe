package server

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
)

// prepareHome makes the home directory (mode 0700) when it is missing
// and checks it on every start, whatever --socket says: it must be a
// directory of this user's that neither group nor others may write to
// (anyone who can write there could replace the database, the token or
// the socket). A home that group or others may only read or enter is
// tightened to 0700, and the server says so. The files metis creates in
// it are 0600 (token, database, lock, socket, addresses).
func prepareHome(home string, log *slog.Logger) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("home %s: %w", home, err)
	}
	st, err := checkPrivateDir(home, "who could replace metis's database and token: chmod 700 it, or choose another --home")
	if err != nil {
		return fmt.Errorf("home %s: %w", home, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(home, perm&^0o077); err != nil {
			return fmt.Errorf("home %s has mode %s, and making it private failed: %w", home, unixMode(st.Mode()), err)
		}
		log.Info("the home directory was readable by group or others: made it private", "home", home, "was", unixMode(st.Mode()), "now", unixMode(st.Mode()&^0o077))
	}
	return nil
}

// checkPrivateDir refuses a directory that is missing, not a directory,
// not this user's, or writable by group or others; why says what such a
// writer could do and what to do about it. It returns the directory's
// stat.
func checkPrivateDir(dir, why string) (fs.FileInfo, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("its directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("the directory %s belongs to uid %d, not to this user (uid %d): use a directory of your own", dir, sys.Uid, os.Geteuid())
	}
	if st.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("the directory %s is writable by group or others (mode %s), %s", dir, unixMode(st.Mode()), why)
	}
	return st, nil
}

// unixMode is m's permission bits as chmod(1) spells them, with the
// setuid, setgid and sticky bits: "0700", "1777".
func unixMode(m fs.FileMode) string {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return fmt.Sprintf("%04o", v)
}
