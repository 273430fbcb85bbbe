package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metis-agent/metis/protocol"
)

// ClientName and ClientVersion are what metis tells servers of itself.
var (
	ClientName    = "metis"
	ClientVersion = "dev"
)

// conn is one live connection to a server: its SDK session and, for a
// stdio server, its process.
type conn struct {
	session *sdk.ClientSession
	proc    *process // nil for streamable HTTP
	info    *sdk.InitializeResult
	// ctx is cancelled when the connection is closed: the calls in
	// flight on it end at once.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// dead is closed once the connection is gone: the session ended (the
	// server closed stdout, an HTTP session was lost) or the process
	// exited.
	dead      chan struct{}
	closeOnce sync.Once
	waited    chan struct{} // session.Wait returned
}

// Causes of a connection's close: metis stopped the server, or the
// connection had ended already.
var (
	errStopped = errors.New("the MCP server was stopped")
	errEnded   = errors.New("the connection ended")
)

// dial starts (stdio) or reaches (HTTP) the server and initializes a
// session with it, within ctx. handlers receive its notifications.
func dial(ctx context.Context, c ServerConfig, environ func() []string, log *slog.Logger, opts *sdk.ClientOptions) (*conn, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: ClientName, Version: ClientVersion}, opts)
	var (
		transport sdk.Transport
		proc      *process
	)
	if c.Transport() == protocol.MCPTransportStdio {
		p, err := startProcess(c, environ(), log)
		if err != nil {
			return nil, err
		}
		proc = p
		// The largest message a stdio server may send: a larger one ends
		// the connection (and the server is restarted).
		transport = &sdk.IOTransport{Reader: p.stdout, Writer: p.stdin, MaxLineLength: maxMessageBytes}
	} else {
		transport = &sdk.StreamableClientTransport{Endpoint: c.URL, HTTPClient: httpClient(c.Headers), MaxEventSize: maxMessageBytes}
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		if proc != nil {
			proc.stop()
			return nil, startError(err, proc)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer to initialize in time (start_timeout): %w", err)
		}
		return nil, err
	}
	cn := &conn{session: session, proc: proc, info: session.InitializeResult(), dead: make(chan struct{}), waited: make(chan struct{})}
	cn.ctx, cn.cancel = context.WithCancelCause(context.Background())
	go func() {
		_ = session.Wait()
		close(cn.waited)
	}()
	go func() {
		var exited chan struct{}
		if proc != nil {
			exited = proc.exited
		}
		select {
		case <-cn.waited:
		case <-exited:
		case <-cn.ctx.Done():
		}
		close(cn.dead)
	}()
	return cn, nil
}

// maxMessageBytes bounds one message from a server (a tool result, a
// tool list): 32 MiB.
const maxMessageBytes = 32 << 20

// startError is the error of a stdio server that failed to start: what
// the SDK said, how the process ended if it did, and its last stderr
// lines.
func startError(err error, p *process) error {
	msg := err.Error()
	select {
	case <-p.exited:
		msg += "; the process " + p.status
	default:
	}
	// Its last words may still be in the pipe.
	t := time.NewTimer(200 * time.Millisecond)
	select {
	case <-p.stderr.done:
	case <-t.C:
	}
	t.Stop()
	if tail := p.stderr.last(); tail != "" {
		msg += "; stderr: " + tail
	}
	return errors.New(msg)
}

// why says how a dead connection ended.
func (c *conn) why() string {
	if c.proc != nil {
		// The session ends as the process does: give its exit a moment
		// to be seen, to say how it ended.
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-c.proc.exited:
		case <-t.C:
		}
		select {
		case <-c.proc.exited:
			msg := "the process " + c.proc.status
			if tail := c.proc.stderr.last(); tail != "" {
				msg += "; stderr: " + tail
			}
			return msg
		default:
		}
	}
	if err := c.session.Wait(); err != nil {
		return "the connection ended: " + err.Error()
	}
	return "the connection ended"
}

// pid is the stdio server's process id, 0 for HTTP.
func (c *conn) pid() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.pid
}

// close ends the connection: the calls in flight end (with cause), a
// stdio server is stopped (process.stop), the session is
// closed (an HTTP session gets its DELETE). It returns once every
// goroutine of the connection has ended.
func (c *conn) close(cause error) {
	c.closeOnce.Do(func() {
		c.cancel(cause)
		if c.proc != nil {
			c.proc.stop()
		}
		_ = c.session.Close()
		<-c.waited
		<-c.dead
	})
}

// httpClient is the client of a streamable HTTP server: the default
// transport, with the entry's headers on every request. It has no
// overall timeout: the server's event stream stays open.
func httpClient(headers map[string]string) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	if len(headers) == 0 {
		return &http.Client{Transport: base}
	}
	return &http.Client{Transport: &headerTransport{base: base, headers: headers}}
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// environ returns a stdio server's environment (serverEnviron) from the
// server's own.
func environ(extra []string, env map[string]string) func() []string {
	return func() []string { return serverEnviron(os.Environ(), extra, env) }
}
