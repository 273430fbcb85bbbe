package client

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultServer is the TCP address of a local server (contract §1).
const DefaultServer = "http://127.0.0.1:8421"

// SocketName is the file name of the server's unix socket in its home
// directory.
const SocketName = "metis.sock"

// socketHost is the Host a client sends over a unix socket: a loopback
// name, which the server's Host check accepts on every listener.
const socketHost = "localhost"

// socketProbeTimeout bounds Locate's connect to the socket.
const socketProbeTimeout = time.Second

// NewSocket returns a client of the server listening on the unix socket
// at path. Its HTTP calls and its stream's WebSocket dial both go over
// the socket (the Host it sends is localhost); the same as
// New("unix://" + path) for an absolute path.
func NewSocket(path string) *Client {
	c := New("http://" + socketHost)
	c.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: SocketTransport(path)}
	c.socket = path
	return c
}

// SocketTransport returns an HTTP transport that dials the unix socket
// at path whatever the URL's host, for a Client.HTTP of one's own (its
// Follow dials the stream with the same transport). It uses no proxy.
func SocketTransport(path string) *http.Transport {
	var d net.Dialer
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:    8,
		IdleConnTimeout: 90 * time.Second,
	}
}

// SocketPath returns the path of the unix socket c talks over, "" when
// it talks TCP.
func (c *Client) SocketPath() string { return c.socket }

// ParseSocketURL returns the socket path of a unix:// server URL
// ("unix:///abs/path/metis.sock", or "unix:relative/path"), and false
// for any other URL.
func ParseSocketURL(server string) (string, bool) {
	u, err := url.Parse(server)
	if err != nil || !strings.EqualFold(u.Scheme, "unix") {
		return "", false
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", false // unix://host/path names no local file
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	if p == "" {
		return "", false
	}
	return p, true
}

// SocketURL is the unix:// server URL of the socket at path.
func SocketURL(path string) string {
	return (&url.URL{Scheme: "unix", Path: path}).String()
}

// LocateOptions say where Locate looks.
type LocateOptions struct {
	// Server is an explicit server URL (a --server flag): when not
	// empty, it wins.
	Server string
	// Home is the server's home directory, where its socket is; "" is
	// $METIS_HOME, else ~/.metis.
	Home string
	// Fallback is the URL when neither is given nor a socket answers;
	// "" is DefaultServer.
	Fallback string
}

// Locate returns the URL of the server a local client command talks to,
// the first of:
//  1. o.Server, when not empty (--server);
//  2. $METIS_SERVER, when set;
//  3. the unix socket <home>/metis.sock, as a unix:// URL, when a
//     server answers on it (a connect within a second);
//  4. o.Fallback, else DefaultServer (TCP).
//
// New accepts every URL it returns. The metis CLI, TUI and ACP agent
// all choose with it.
func Locate(ctx context.Context, o LocateOptions) string {
	if o.Server != "" {
		return o.Server
	}
	if s := os.Getenv("METIS_SERVER"); s != "" {
		return s
	}
	home := o.Home
	if home == "" {
		home = defaultHome()
	}
	if p := filepath.Join(home, SocketName); socketAnswers(ctx, p) {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		return SocketURL(p)
	}
	if o.Fallback != "" {
		return o.Fallback
	}
	return DefaultServer
}

// socketAnswers reports whether something accepts a connection on the
// unix socket at path.
func socketAnswers(ctx context.Context, path string) bool {
	if st, err := os.Stat(path); err != nil || st.Mode().Type() != os.ModeSocket {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, socketProbeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// defaultHome is $METIS_HOME, else ~/.metis: where a local server keeps
// its state and its socket.
func defaultHome() string {
	if h := os.Getenv("METIS_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".metis")
	}
	return ".metis"
}

// newFromURL builds the client of New: a unix:// URL gets NewSocket.
func newFromURL(server string) (*Client, bool) {
	if p, ok := ParseSocketURL(server); ok {
		return NewSocket(p), true
	}
	return nil, false
}
