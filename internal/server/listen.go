package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metis-agent/metis/internal/metrics"
)

// readHeaderTimeout bounds the request line and headers (and, under TLS,
// the handshake).
const readHeaderTimeout = 10 * time.Second

// capWarnEvery rate-limits the log line said when the connection cap is
// reached.
const capWarnEvery = time.Minute

// newHTTPServer returns the HTTP server of h with the configured
// timeouts: headers within readHeaderTimeout, a request body within
// --read-timeout, keep-alive connections closed after --idle-timeout.
// A WebSocket, once upgraded, has no deadline of these: its own pings
// watch it.
func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           bodyDeadline(h, s.Config.ReadTimeout),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       s.Config.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug),
		// HTTP/1.1 only, with TLS too (see remote.go).
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
}

// listen binds cfg.Addr and serves it and the unix socket (bound by
// New, when configured) with one HTTP server: the same handler, the
// same guard, the same token check. Each listener has its own
// connection cap of --max-connections: a flood of network clients
// cannot lock the local tools out of the socket.
func (s *Server) listen() error {
	ln, err := net.Listen("tcp", s.Config.Addr)
	if err != nil {
		if s.sock != nil {
			_ = s.sock.close()
			s.sock = nil
		}
		return fmt.Errorf("listen %s: %w", s.Config.Addr, err)
	}
	s.ln = ln
	s.http = s.newHTTPServer(s.handler)
	s.serve(s.listener(ln))
	if s.sock != nil {
		// Plain HTTP whatever TCP speaks: TLS over a socket of one's own
		// protects nothing, and the guard knows a socket request by its
		// local address (api.OverSocket).
		// A shell command's connection is refused (sandbox.go).
		s.serve(newCapListener(shellCallRefuser{s.sock.ln, s.Log}, s.Config.MaxConnections, s.httpMetrics, s.Log))
	}
	return nil
}

// serve runs the HTTP server on ln in the background until Shutdown.
func (s *Server) serve(ln net.Listener) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.Log.Error("http serve", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// SocketPath is the path of the unix socket the server listens on, ""
// for none.
func (s *Server) SocketPath() string {
	if s.sock == nil {
		return ""
	}
	return s.sock.path
}

// socketNote is what the ready line says of the unix socket.
func (s *Server) socketNote() string {
	if s.sock == nil {
		return ""
	}
	return "; unix socket " + s.sock.path
}

// listener wraps ln, the TCP listener, with the connection cap and,
// when configured, TLS.
func (s *Server) listener(ln net.Listener) net.Listener {
	ln = newCapListener(ln, s.Config.MaxConnections, s.httpMetrics, s.Log)
	if s.remote.tls != nil {
		ln = tls.NewListener(ln, s.remote.tls)
	}
	return ln
}

// scheme is the URL scheme the server answers on.
func (s *Server) scheme() string {
	if s.remote.tls != nil {
		return "https"
	}
	return "http"
}

// bodyDeadline gives the body of a request (one that has a body and is
// not an upgrade) d to arrive in full; a body trickled slower is cut
// (the handler's read fails; the API answers 408). The deadline is
// lifted once the body is read, so a slow handler or a long answer is
// not cut by it.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && r.Header.Get("Upgrade") == "" {
			rc := http.NewResponseController(w)
			if err := rc.SetReadDeadline(time.Now().Add(d)); err == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			}
		}
		h.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return n, err
}

// capListener serves at most max connections at once: past that, Accept
// waits until one closes (the kernel's backlog holds the newcomers), and
// says so in a metric and, at most once a minute, a log line.
type capListener struct {
	net.Listener
	sem      chan struct{}
	done     chan struct{}
	close    sync.Once
	metrics  *metrics.HTTP
	log      *slog.Logger
	lastWarn atomic.Int64 // unix nanoseconds
}

func newCapListener(ln net.Listener, max int, m *metrics.HTTP, log *slog.Logger) *capListener {
	return &capListener{Listener: ln, sem: make(chan struct{}, max), done: make(chan struct{}), metrics: m, log: log}
}

func (l *capListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		l.reached()
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	if l.metrics != nil {
		l.metrics.Connections.Inc()
	}
	return &capConn{Conn: c, l: l}, nil
}

func (l *capListener) reached() {
	if l.metrics != nil {
		l.metrics.CapReached.Inc()
	}
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last >= int64(capWarnEvery) && l.lastWarn.CompareAndSwap(last, now) {
		l.log.Warn("connection cap reached: new connections wait until one closes", "max_connections", cap(l.sem))
	}
}

func (l *capListener) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// capConn gives its slot back when closed (once, however often Close is
// called; a hijacked WebSocket connection closes it too).
type capConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.l.metrics != nil {
			c.l.metrics.Connections.Dec()
		}
		<-c.l.sem
	})
	return err
}
