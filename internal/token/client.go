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
// serverURL, or "" for none. In order:
//
//  1. the file given with --token-file (file != "");
//  2. $METIS_TOKEN;
//  3. home's token file (home "" means $METIS_HOME, else ~/.metis), but
//     only to the server running on that home: serverURL must be one of
//     the addresses that server recorded beside the token
//     (AddressesFile), and be https, or a unix socket that belongs to
//     this user. A server named by --server or $METIS_SERVER that is
//     not the home's own never sees the home's token, and a loopback
//     http server is never sent it unasked either (when it is not the
//     home's server, another user's program could be listening on that
//     port).
//
// Whatever its source, a token is never sent over plain http to a host
// that is not loopback: anyone on the network path could read it. That
// is an error saying so, not a silent omission.
func ForClient(serverURL, file, home string) (string, error) {
	if file != "" {
		tok, err := Read(file)
		if err != nil {
			return "", err
		}
		return sendable(tok, serverURL, "--token-file")
	}
	if v, ok := os.LookupEnv(EnvVar); ok {
		tok, err := Parse(v)
		if err != nil {
			return "", fmt.Errorf("$%s: %w", EnvVar, err)
		}
		return sendable(tok, serverURL, "$"+EnvVar)
	}
	if home == "" {
		home = DefaultHome()
	}
	if p, ok := socketPath(serverURL); ok {
		if !OwnSocket(p) {
			return "", nil
		}
	} else if !NeedsToken(serverURL) {
		return "", nil // loopback http: never unasked
	}
	addrs, err := ReadAddresses(home)
	if err != nil || !Serves(addrs, serverURL) {
		return "", nil // not the home's server (or none runs there)
	}
	tok, err := Read(filepath.Join(home, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return sendable(tok, serverURL, filepath.Join(home, FileName))
}

// sendable returns tok (from where) when it may go to serverURL, and
// an error when that would be over plain http to a host that is not
// loopback.
func sendable(tok, serverURL, where string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("server URL %q: %w", serverURL, err)
	}
	if s := strings.ToLower(u.Scheme); (s == "http" || s == "ws") && !IsLoopbackHost(u.Hostname()) {
		return "", fmt.Errorf("refusing to send the token (from %s) to %s over plain http: anyone on the way could read it; "+
			"use https (metis serve --tls-cert and --tls-key, or a TLS proxy), or reach the server over loopback (an SSH tunnel)", where, u.Host)
	}
	return tok, nil
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
