package server_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

// dialRaw opens a plain TCP connection to the harness.
func dialRaw(t *testing.T, h *servertest.Harness) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes a GET /sessions on c (keep-alive) and reads the
// answer within timeout.
func roundTrip(c net.Conn, br *bufio.Reader, timeout time.Duration) (*http.Response, error) {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// TestTrickledBodyIsCut: a request body sent a byte at a time, slower
// than --read-timeout allows, is cut: the server answers 408 and closes
// the connection long before the body would be complete.
func TestTrickledBodyIsCut(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.ReadTimeout = 300 * time.Millisecond })
	c := dialRaw(t, h)
	body := `{"workspace_path":"` + h.Workspace + `"}`
	head := "POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
		itoa(len(body)) + "\r\n\r\n"
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		answered <- resp
	}()
	// One byte every 100ms: the whole body would take seconds.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < len(body); i++ {
		select {
		case resp := <-answered:
			if resp == nil || resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("answer %v after %d of %d bytes, want 408", resp, i, len(body))
			}
			return
		case <-tick.C:
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return // cut: the server closed the connection
			}
		}
	}
	t.Fatalf("the server read the whole body trickled over %d bytes", len(body))
}

// TestSlowButOnTimeBodyIsServed: a body that arrives in pieces within
// --read-timeout is served normally.
func TestSlowButOnTimeBodyIsServed(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.ReadTimeout = 5 * time.Second })
	c := dialRaw(t, h)
	body := `{"workspace_path":"` + h.Workspace + `"}`
	io.WriteString(c, "POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n")
	io.WriteString(c, body[:5])
	time.Sleep(50 * time.Millisecond)
	io.WriteString(c, body[5:])
	c.SetDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("answer %v, %v", resp, err)
	}
	resp.Body.Close()
}

// TestIdleKeepAliveIsClosed: a keep-alive connection that sends nothing
// after its request is closed by the server after --idle-timeout.
func TestIdleKeepAliveIsClosed(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.IdleTimeout = 200 * time.Millisecond })
	c := dialRaw(t, h)
	br := bufio.NewReader(c)
	resp, err := roundTrip(c, br, 10*time.Second)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("first request: %v %v", resp, err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the idle keep-alive connection was still open after 10s")
	}
	if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("idle connection: %v, want EOF", err)
	}
}

// TestConnectionCap: with --max-connections 2 and two connections open,
// a third waits (its request is not served) until one of them closes;
// the wait is counted in a metric.
func TestConnectionCap(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.MaxConnections = 2 })
	var held []net.Conn
	for range 2 {
		c := dialRaw(t, h)
		if resp, err := roundTrip(c, bufio.NewReader(c), 10*time.Second); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("request under the cap: %v %v", resp, err)
		}
		held = append(held, c)
	}
	third := dialRaw(t, h) // the kernel accepts it; metis does not serve it yet
	br := bufio.NewReader(third)
	if resp, err := roundTrip(third, br, 500*time.Millisecond); err == nil {
		t.Fatalf("a connection past the cap was served: %v", resp.Status)
	}
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil) // the request written above
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the waiting connection after one closed: %v %v", resp, err)
	}
	resp.Body.Close()
	third.SetReadDeadline(time.Time{})
	// The metric says the cap was reached; read it on the waiting
	// connection (the only free slot is its own).
	io.WriteString(third, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "metis_http_connection_cap_reached_total 0") || !strings.Contains(string(b), "metis_http_connections 2") {
		t.Fatalf("metrics:\n%s", grepLines(string(b), "metis_http_"))
	}
}

// TestWebSocketOutlivesReadAndIdleTimeouts: an upgraded connection is
// not cut by --read-timeout or --idle-timeout: after several times both,
// a turn still streams over it.
func TestWebSocketOutlivesReadAndIdleTimeouts(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) {
		c.ReadTimeout = 100 * time.Millisecond
		c.IdleTimeout = 100 * time.Millisecond
	})
	sid := h.CreateSession()
	c := attach(t, h, sid)
	time.Sleep(time.Second) // ten times both timeouts, with nothing sent
	turn := h.Submit(sid, "/echo still here")
	evs := c.Events(wait, streamtest.UntilType("turn.completed", turn))
	if len(evs) == 0 {
		t.Fatal("no events")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
