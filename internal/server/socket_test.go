package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
)

// withSocket gives the harness a unix socket at <home>/metis.sock.
func withSocket(c *config.Config) { c.Socket = filepath.Join(c.Home, config.SocketName) }

// socketHTTP is an HTTP client of the unix socket at path.
func socketHTTP(t *testing.T, path string) *http.Client {
	t.Helper()
	tr := client.SocketTransport(path)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: wait}
}

// get sends GET path over hc to Host host and returns the status and
// body.
func get(t *testing.T, hc *http.Client, host, path string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s over the socket: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// followTurn runs one /echo turn on a new session through c (HTTP calls
// and the WebSocket stream) and returns the text the stream delivered.
func followTurn(t *testing.T, c *client.Client, workspace, text string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := c.CreateSession(ctx, workspace, "")
	if err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	turn, got := "", ""
	err = c.Follow(fctx, s.ID, client.FollowOptions{OnUpdate: func(u client.Update) {
		switch {
		case u.Kind == client.Subscribed && turn == "":
			var serr error
			if turn, serr = c.Submit(fctx, s.ID, "/echo "+text); serr != nil {
				t.Error(serr)
				stop()
			}
		case u.Kind == client.EventApplied && turn != "" && u.View.Turn.ID == turn && u.View.Turn.Status != "in_flight":
			if u.View.Turn.Status == "completed" && len(u.View.Messages) > 0 {
				got = lastText(u.View)
			}
			stop()
		}
	}})
	if err != context.Canceled {
		t.Fatalf("Follow over the socket: %v", err)
	}
	return got
}

// lastText is the text of the view's last message.
func lastText(v *client.View) string {
	m := v.Messages[len(v.Messages)-1]
	var out strings.Builder
	for _, b := range m.Blocks {
		out.WriteString(b.Text)
	}
	return out.String()
}

// TestSocketServesTheWholeHandler: with a socket configured, the server
// listens on TCP and on the socket, and the socket serves what TCP
// serves: the API, the dashboard, /metrics and the WebSocket stream,
// whose ws_url a client that came over the socket dials over the socket
// too.
func TestSocketServesTheWholeHandler(t *testing.T) {
	h := servertest.Start(t, "", withSocket)
	sock := filepath.Join(h.Home, config.SocketName)
	if got := h.Server.SocketPath(); got != sock {
		t.Fatalf("SocketPath %q, want %q", got, sock)
	}
	hc := socketHTTP(t, sock)
	sid := h.CreateSession() // over TCP
	for _, path := range []string{"/sessions", "/sessions/" + sid, "/sessions/" + sid + "/messages", "/", "/metrics"} {
		if st, body := get(t, hc, "localhost", path, nil); st != http.StatusOK {
			t.Errorf("GET %s over the socket: %d %s", path, st, body)
		}
	}
	_, body := get(t, hc, "localhost", "/sessions", nil)
	if !strings.Contains(body, sid) {
		t.Fatalf("the socket does not list the session made over TCP: %s", body)
	}
	var info struct {
		WSURL string `json:"ws_url"`
	}
	_, body = get(t, hc, "localhost", "/sessions/"+sid, nil)
	if err := json.Unmarshal([]byte(body), &info); err != nil || !strings.HasPrefix(info.WSURL, "ws://localhost/sessions/"+sid+"/stream?attach=") {
		t.Fatalf("ws_url over the socket: %q (%v)", info.WSURL, err)
	}
	// The ws_url, dialed over the socket, is the stream.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, info.WSURL, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("dial ws_url over the socket: %v", err)
	}
	ws.Close(websocket.StatusNormalClosure, "")

	// The SSE stream is there too: its first frame is the ack, then the
	// session's history replays from a cursor-less snapshot.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/sessions/"+sid+"/events?snapshot=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("SSE over the socket: %v", err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("SSE over the socket: %d %q", resp.StatusCode, ct)
	}
	var frames []string
	sc := bufio.NewScanner(resp.Body)
	for len(frames) < 2 && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			frames = append(frames, d)
		}
	}
	resp.Body.Close()
	if len(frames) < 2 || !strings.Contains(frames[0], `"type":"subscribe_ack"`) || !strings.Contains(frames[1], `"type":"snapshot"`) {
		t.Fatalf("SSE over the socket sent %q", frames)
	}

	// The Go client made for the socket runs a whole turn over it.
	for _, c := range []*client.Client{client.NewSocket(sock), client.New("unix://" + sock)} {
		if c.SocketPath() != sock {
			t.Fatalf("SocketPath %q", c.SocketPath())
		}
		if got := followTurn(t, c, h.Workspace, "over the socket"); got != "over the socket" {
			t.Fatalf("turn over the socket answered %q", got)
		}
		c.HTTP.CloseIdleConnections()
	}
}

// TestSocketMode: the socket is created with mode 0600, and the ready
// line names it.
func TestSocketMode(t *testing.T) {
	s, err := newServer(t, withSocket)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, pw); pw.Close() }()
	line, _ := bufio.NewReader(pr).ReadString('\n')
	sock := filepath.Join(s.Config.Home, config.SocketName)
	st, serr := os.Lstat(sock)
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	if st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket with 0600", st.Mode())
	}
	if !strings.HasPrefix(line, "metis serving http://127.0.0.1:") || !strings.Contains(line, "; unix socket "+sock) {
		t.Fatalf("ready line %q does not name the socket", line)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket is still there after shutdown: %v", err)
	}
}

// staleSocket leaves a socket file at path that nobody listens on: what
// a server killed with SIGKILL leaves behind.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if st, err := os.Lstat(path); err != nil || st.Mode().Type() != os.ModeSocket {
		t.Fatalf("no stale socket: %v", err)
	}
}

// TestStaleSocketIsReplaced: a socket file nobody answers on is removed
// and the server binds its own.
func TestStaleSocketIsReplaced(t *testing.T) {
	home := t.TempDir()
	sock := filepath.Join(home, config.SocketName)
	staleSocket(t, sock)
	h := servertest.Start(t, home, withSocket)
	if st, body := get(t, socketHTTP(t, sock), "localhost", "/sessions", nil); st != http.StatusOK {
		t.Fatalf("over the replaced socket: %d %s", st, body)
	}
	h.Stop()
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket is still there after shutdown: %v", err)
	}
}

// TestLiveSocketIsNotStolen: a second server started on the home of a
// running one (so on its socket) does not start, says why, and leaves
// the first alone: it goes on answering on its socket, and its turn in
// flight is not taken for one left by a crash (the second server fails
// before it opens the database and would "recover" that turn).
func TestLiveSocketIsNotStolen(t *testing.T) {
	first := servertest.Start(t, "", withSocket, func(c *config.Config) { c.DemoDelay = 5 * time.Millisecond })
	sock := filepath.Join(first.Home, config.SocketName)
	sid := first.CreateSession()
	turn := first.Submit(sid, "/long 40")

	second, err := server.New(context.Background(), first.Config, slog.New(slog.DiscardHandler))
	if err == nil {
		second.Shutdown(context.Background())
		t.Fatal("a second server started on the home of a running one")
	}
	if !strings.Contains(err.Error(), "another server is answering on it") {
		t.Fatalf("second server: %v, want a refusal naming the live server", err)
	}
	if st, body := get(t, socketHTTP(t, sock), "localhost", "/sessions", nil); st != http.StatusOK {
		t.Fatalf("the first server over its socket after the second tried: %d %s", st, body)
	}
	first.WaitTurn(sid)
	var info struct {
		Session struct {
			TurnCount int `json:"turn_count"`
		} `json:"session"`
	}
	evs, err := first.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.TurnCompleted, event.TurnCancelled}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != event.TurnCompleted || evs[0].TurnID != turn {
		t.Fatalf("the first server's turn ended with %v, want turn.completed", evs)
	}
	if first.Do("GET", "/sessions/"+sid, nil, &info); info.Session.TurnCount != 1 {
		t.Fatalf("turn count %d", info.Session.TurnCount)
	}
}

// TestSocketRefusesBadPaths: a path that exists and is not a socket, a
// path too long for a unix socket, and a directory others may write to
// are clear errors; an existing file is left as it was.
func TestSocketRefusesBadPaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	subdir := filepath.Join(dir, "subdir")
	open := filepath.Join(dir, "open")
	for _, d := range []string{subdir, open} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, strings.Repeat("x", server.MaxSocketPath))
	for name, c := range map[string]struct{ path, want string }{
		"regular file":  {file, "exists and is not a socket (a regular file)"},
		"directory":     {subdir, "exists and is not a socket (a directory)"},
		"symbolic link": {link, "exists and is not a socket (a symbolic link)"},
		"too long":      {long, "a unix socket path may have at most"},
		"open dir":      {filepath.Join(open, "metis.sock"), "writable by group or others"},
		"no dir":        {filepath.Join(dir, "nope", "metis.sock"), "no such file or directory"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := newServer(t, func(cfg *config.Config) { cfg.Socket = c.path }); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want an error saying %q", err, c.want)
			}
		})
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep me" {
		t.Fatalf("the file in the way was touched: %q %v", b, err)
	}
}

// TestSocketOff: without a socket configured (--socket=off), only TCP
// listens and no socket file appears.
func TestSocketOff(t *testing.T) {
	cfg, err := config.Load([]string{"--home", t.TempDir(), "--socket=off", "--addr", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	if _, err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	if s.SocketPath() != "" {
		t.Fatalf("SocketPath %q with --socket=off", s.SocketPath())
	}
	if _, err := os.Lstat(filepath.Join(cfg.Home, config.SocketName)); !os.IsNotExist(err) {
		t.Fatalf("a socket file with --socket=off: %v", err)
	}
}

// TestSocketRequiresTheToken: when the server requires its token (here a
// token file), requests over the socket need it too, the stream's
// upgrade included.
func TestSocketRequiresTheToken(t *testing.T) {
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte("socket-token-0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := servertest.Start(t, "", withSocket, func(c *config.Config) { c.TokenFile = tf })
	sock := filepath.Join(h.Home, config.SocketName)
	hc := socketHTTP(t, sock)
	if st, body := get(t, hc, "localhost", "/sessions", nil); st != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
		t.Fatalf("without the token over the socket: %d %s", st, body)
	}
	if st, _ := get(t, hc, "localhost", "/sessions", http.Header{"Authorization": {"Bearer wrong-token-0123456789"}}); st != http.StatusUnauthorized {
		t.Fatalf("a wrong token over the socket: %d", st)
	}
	if st, body := get(t, hc, "localhost", "/sessions", http.Header{"Authorization": {"Bearer socket-token-0123456789abcdef"}}); st != http.StatusOK {
		t.Fatalf("with the token over the socket: %d %s", st, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	anon := client.NewSocket(sock)
	defer anon.HTTP.CloseIdleConnections()
	sid := h.CreateSession()
	if err := anon.Follow(ctx, sid, client.FollowOptions{}); !client.IsUnauthorized(err) {
		t.Fatalf("Follow over the socket without the token: %v", err)
	}
	// The upgrade itself is refused without the token, even with a valid
	// attach token got with it.
	withTok := client.NewSocket(sock)
	defer withTok.HTTP.CloseIdleConnections()
	withTok.Token = "socket-token-0123456789abcdef"
	a, err := withTok.Attach(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	_, resp, err := websocket.Dial(ctx, a.WSURL, &websocket.DialOptions{HTTPClient: hc})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("upgrade over the socket without the token: %v %v", resp, err)
	}
	if got := followTurn(t, withTok, h.Workspace, "with the token"); got != "with the token" {
		t.Fatalf("turn over the socket with the token answered %q", got)
	}
}

// TestSocketGuard: over the socket the Host check accepts loopback
// names (what the Go client and curl send) and refuses others, and an
// Origin that is not the server's own page is refused, as over TCP.
func TestSocketGuard(t *testing.T) {
	h := servertest.Start(t, "", withSocket)
	hc := socketHTTP(t, filepath.Join(h.Home, config.SocketName))
	for host, want := range map[string]int{
		"localhost":      http.StatusOK,
		"127.0.0.1":      http.StatusOK,
		"[::1]":          http.StatusOK,
		"localhost:8421": http.StatusOK,
		"evil.example":   http.StatusForbidden,
		"metis":          http.StatusForbidden,
	} {
		if st, body := get(t, hc, host, "/sessions", nil); st != want {
			t.Errorf("Host %s over the socket: %d %s, want %d", host, st, body, want)
		}
	}
	for origin, want := range map[string]int{
		"http://localhost":         http.StatusOK,
		"http://evil.example":      http.StatusForbidden,
		"null":                     http.StatusForbidden,
		"https://localhost":        http.StatusForbidden,
		"http://localhost:1234":    http.StatusForbidden,
		"http://127.0.0.1.nip.io/": http.StatusForbidden,
	} {
		if st, body := get(t, hc, "localhost", "/sessions", http.Header{"Origin": {origin}}); st != want {
			t.Errorf("Origin %s over the socket: %d %s, want %d", origin, st, body, want)
		}
	}
}

// TestSocketIsPlainUnderTLS: a server that speaks TLS on TCP serves
// plain HTTP on its socket, and hands a socket client a ws:// stream URL
// (not wss://) that works over the socket.
func TestSocketIsPlainUnderTLS(t *testing.T) {
	cert, key := servertest.SelfSignedCert(t, t.TempDir())
	h := servertest.Start(t, "", withSocket, func(c *config.Config) { c.TLSCert, c.TLSKey = cert, key })
	if !strings.HasPrefix(h.URL, "https://") {
		t.Fatalf("URL %s", h.URL)
	}
	sock := filepath.Join(h.Home, config.SocketName)
	c := client.NewSocket(sock)
	defer c.HTTP.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := c.CreateSession(ctx, h.Workspace, "")
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Attach(ctx, s.ID)
	if err != nil || !strings.HasPrefix(a.WSURL, "ws://localhost/") {
		t.Fatalf("ws_url over the socket of a TLS server: %q %v", a.WSURL, err)
	}
	if got := followTurn(t, c, h.Workspace, "plain"); got != "plain" {
		t.Fatalf("turn over the socket of a TLS server answered %q", got)
	}
}

// TestSocketHasItsOwnConnectionCap: the socket's connections are capped
// by --max-connections apart from TCP's: with every TCP slot held (a
// flood from the network), a local tool still gets in over the socket;
// past the socket's own cap, a socket connection waits until one closes.
func TestSocketHasItsOwnConnectionCap(t *testing.T) {
	h := servertest.Start(t, "", withSocket, func(c *config.Config) { c.MaxConnections = 1 })
	held := dialRaw(t, h)
	if resp, err := roundTrip(held, bufio.NewReader(held), 10*time.Second); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request under the cap: %v %v", resp, err)
	}
	sock := filepath.Join(h.Home, config.SocketName)
	dialSock := func() net.Conn {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first := dialSock()
	if resp, err := roundTrip(first, bufio.NewReader(first), 10*time.Second); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("over the socket with TCP at its cap: %v %v", resp, err)
	}
	second := dialSock()
	br := bufio.NewReader(second)
	if resp, err := roundTrip(second, br, 500*time.Millisecond); err == nil {
		t.Fatalf("a socket connection past the socket's cap was served: %v", resp.Status)
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the waiting socket connection after the other closed: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestOneServerPerHome: without a socket to tell (--socket=off), a
// second server on the home of a running one is still refused before it
// opens the database, by the home's lock; once the first has shut down,
// a server starts on that home again.
func TestOneServerPerHome(t *testing.T) {
	first := servertest.Start(t, "")
	cfg := first.Config
	if cfg.Socket != "" {
		t.Fatal("the harness has a socket")
	}
	_, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "another metis server is running on the home "+first.Home) {
		t.Fatalf("second server on the home: %v", err)
	}
	if st := first.Do("GET", "/sessions", nil, nil); st != http.StatusOK {
		t.Fatalf("the first server after the second tried: %d", st)
	}
	first.Stop()
	again := servertest.Start(t, first.Home)
	if st := again.Do("GET", "/sessions", nil, nil); st != http.StatusOK {
		t.Fatalf("a server on the home after the first stopped: %d", st)
	}
	st, err := os.Stat(filepath.Join(first.Home, "metis.lock"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v %v", st, err)
	}
}
