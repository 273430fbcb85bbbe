package token

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// EnvVar is the environment variable a client command reads the token
// from.
const EnvVar = "METIS_TOKEN"

// ForClient returns the token a client command sends to the server at
// serverURL, or "" for none. In order: the file given with --token-file
// (file != ""), $METIS_TOKEN, and, only when the server is reached over
// https, at a non-loopback host or over a unix socket (unix:///path)
// that belongs to this user, home's token file if it exists (home ""
// means $METIS_HOME, else ~/.metis). A loopback http server needs no
// token, so none is sent to it unless asked for: another user's program
// could be listening on that port. A socket is owned by whoever created
// it, so one of this user's own is this user's server.
func ForClient(serverURL, file, home string) (string, error) {
	if file != "" {
		return Read(file)
	}
	if v, ok := os.LookupEnv(EnvVar); ok {
		tok, err := Parse(v)
		if err != nil {
			return "", fmt.Errorf("$%s: %w", EnvVar, err)
		}
		return tok, nil
	}
	if p, ok := socketPath(serverURL); ok {
		if !OwnSocket(p) {
			return "", nil
		}
	} else if !NeedsToken(serverURL) {
		return "", nil
	}
	if home == "" {
		home = DefaultHome()
	}
	tok, err := Read(filepath.Join(home, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return tok, err
}

// NeedsToken reports whether a server at serverURL may expect a token:
// it is reached over https, or its host is not a loopback name.
func NeedsToken(serverURL string) bool {
	u, err := url.Parse(serverURL)
	if err != nil {
		return true
	}
	if u.Scheme == "https" || u.Scheme == "wss" {
		return true
	}
	return !IsLoopbackHost(u.Hostname())
}

// IsLoopbackHost reports whether host (no port) is "localhost" or a
// loopback IP address.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// DefaultHome is $METIS_HOME, else ~/.metis.
func DefaultHome() string {
	if h := os.Getenv("METIS_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".metis")
	}
	return ".metis"
}

// socketPath returns the path of a unix:// server URL.
func socketPath(serverURL string) (string, bool) {
	u, err := url.Parse(serverURL)
	if err != nil || !strings.EqualFold(u.Scheme, "unix") || u.Host != "" && u.Host != "localhost" {
		return "", false
	}
	if u.Path != "" {
		return u.Path, true
	}
	return u.Opaque, u.Opaque != ""
}

// OwnSocket reports whether path is (or, through symbolic links, leads
// to) a unix socket that belongs to this user: its owner is the
// effective user id.
func OwnSocket(path string) bool {
	st, err := os.Stat(path)
	if err != nil || st.Mode().Type() != fs.ModeSocket {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == os.Geteuid()
}
