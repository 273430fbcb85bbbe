package mcp_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metis-agent/metis/protocol"
)

// Streamable HTTP servers.

// headerLog records the MCP headers of the requests a server got.
type headerLog struct {
	mu   sync.Mutex
	reqs []http.Header
}

func (l *headerLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		hd := http.Header{}
		for _, k := range []string{"Mcp-Session-Id", "Authorization", "X-Team"} {
			if v := r.Header.Get(k); v != "" {
				hd.Set(k, v)
			}
		}
		hd.Set("Method", r.Method)
		l.reqs = append(l.reqs, hd)
		l.mu.Unlock()
		h.ServeHTTP(w, r)
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			l.mu.Lock()
			hd.Set("Issued-Session-Id", id) // the answer's
			l.mu.Unlock()
		}
	})
}

func (l *headerLog) all() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]http.Header, len(l.reqs))
	for i, h := range l.reqs {
		out[i] = h.Clone()
	}
	return out
}

// swappable serves with a handler that can be replaced (a server
// restart that forgets its sessions).
type swappable struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

func (s *swappable) set(h http.Handler) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

// goHTTPServer is the fault server over streamable HTTP; its sessions
// are closed when the test ends (after the manager's close).
func goHTTPServer(t *testing.T) http.Handler {
	srv := newFaultServer(false)
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	})
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
}

func TestHTTPServerHeadersFromTheEnvironmentAndReconnectAfter404(t *testing.T) {
	t.Setenv("TEST_MCP_TOKEN", "tok-123")
	var log headerLog
	sw := &swappable{h: goHTTPServer(t)}
	ts := httptest.NewServer(log.wrap(sw))
	t.Cleanup(ts.Close) // after the manager's close (cleanups run last first)
	m, _ := newManager(t, "  web:\n    url: "+ts.URL+"/mcp\n    headers: {Authorization: \"Bearer ${TEST_MCP_TOKEN}\", X-Team: plain}\n")
	tools := toolsOf(t, m, "s1")
	res, err := call(t, ctxT(t, 30*time.Second), mustTool(t, tools, "mcp__web__echo"), `{"text": "over http"}`)
	if err != nil || res.Content != "echo: over http" {
		t.Fatalf("echo over HTTP: %q, %v", res.Content, err)
	}
	for _, h := range log.all() {
		if h.Get("Authorization") != "Bearer tok-123" || h.Get("X-Team") != "plain" {
			t.Fatalf("a %s request without the configured headers: %v", h.Get("Method"), h)
		}
	}
	st := serverStatus(t, m, "web")
	if st.Transport != protocol.MCPTransportHTTP || st.URL != ts.URL+"/mcp" || st.PID != 0 {
		t.Fatalf("status: %+v", st)
	}

	// The server forgets its sessions (a restart): the next call gets a
	// 404, and is made again on a new session.
	sw.set(goHTTPServer(t))
	res, err = call(t, ctxT(t, 30*time.Second), tools["mcp__web__echo"], `{"text": "after the restart"}`)
	if err != nil || res.Content != "echo: after the restart" {
		t.Fatalf("after the server lost the session: %q, %v", res.Content, err)
	}
	if st := waitState(t, m, "web", protocol.MCPStateRunning); st.Restarts != 1 {
		t.Fatalf("status after the reconnection: %+v", st)
	}
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startEverythingHTTP runs server-everything's streamable HTTP
// transport on port, until stop or the test's end.
func startEverythingHTTP(t *testing.T, port int) (stop func()) {
	cmd := exec.Command("node", npmServer(t, "server-everything"), "streamableHttp")
	cmd.Env = append(cmd.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return stop
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything never listened on %d", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEverythingServerOverStreamableHTTP(t *testing.T) {
	port := freePort(t)
	stop := startEverythingHTTP(t, port)
	// A recording proxy in front of it: every request after the first
	// carries the session id the server gave.
	target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", port))
	var log headerLog
	proxy := httptest.NewServer(log.wrap(httputil.NewSingleHostReverseProxy(target)))
	t.Cleanup(proxy.Close)
	m, _ := newManager(t, "  everything:\n    url: "+proxy.URL+"/mcp\n")
	tools := toolsOf(t, m, "s1")
	ctx := ctxT(t, 30*time.Second)
	res, err := call(t, ctx, mustTool(t, tools, "mcp__everything__echo"), `{"message": "streamed"}`)
	if err != nil || !strings.Contains(res.Content, "streamed") {
		t.Fatalf("echo: %q, %v", res.Content, err)
	}
	res, err = call(t, ctx, mustTool(t, tools, "mcp__everything__get-sum"), `{"a": 40, "b": 2}`)
	if err != nil || !strings.Contains(res.Content, "42") {
		t.Fatalf("get-sum: %q, %v", res.Content, err)
	}
	reqs := log.all()
	if len(reqs) < 3 {
		t.Fatalf("only %d requests", len(reqs))
	}
	issued := ""
	for i, h := range reqs {
		got := h.Get("Mcp-Session-Id")
		if issued != "" && got != issued {
			t.Fatalf("request %d (%s) carries session id %q, not the one the server issued (%q)", i+1, h.Get("Method"), got, issued)
		}
		if id := h.Get("Issued-Session-Id"); id != "" && issued == "" {
			issued = id
		}
	}
	if issued == "" {
		t.Fatal("server-everything issued no session id")
	}

	// server-everything restarts (it forgets its sessions and answers
	// a stale one with 400): the failed call has the connection checked
	// and a new session made; later calls work.
	stop()
	startEverythingHTTP(t, port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		tools = toolsOf(t, m, "s1")
		if tl, ok := tools["mcp__everything__echo"]; ok {
			if res, err := call(t, ctxT(t, 30*time.Second), tl, `{"message": "again"}`); err == nil && strings.Contains(res.Content, "again") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls never worked again after server-everything restarted: %+v", serverStatus(t, m, "everything"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := serverStatus(t, m, "everything"); st.Restarts < 1 {
		t.Fatalf("no reconnection counted: %+v", st)
	}
}
