package api_test

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/servertest"
)

// loginFrom posts body to /login over a keep-alive client c and
// returns the status and Retry-After (checking the error code of a
// 429).
func loginFrom(t *testing.T, c *http.Client, h *servertest.Harness, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", h.URL+"/login", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusTooManyRequests && !bytes.Contains(b, []byte(`"code":"`+api.CodeTooManyRequests+`"`)) {
		t.Fatalf("429 body %s", b)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestLoginFlood: 3,000 wrong logins from one address (the attack that
// wrote 2,900 log lines a second) are refused 401 for the first ten,
// then 429 with Retry-After; the log grows by a summary line or two,
// not a line each; the right token from that address waits too, while
// another address logs in at once.
func TestLoginFlood(t *testing.T) {
	var logs servertest.SyncBuffer
	h := servertest.StartLogged(t, "", slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})), withPublicName("metis.example"))
	before := len(logs.String())
	c := &http.Client{Timeout: 20 * time.Second}
	defer c.CloseIdleConnections()
	const flood = 3000
	var unauthorized, limited int
	for i := range flood {
		status, retry := loginFrom(t, c, h, `{"token":"wrong-token-`+strconv.Itoa(i)+`-0123456789"}`)
		switch status {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusTooManyRequests:
			limited++
			if n, err := strconv.Atoi(retry); err != nil || n < 1 {
				t.Fatalf("429 with Retry-After %q", retry)
			}
		default:
			t.Fatalf("wrong login %d: status %d", i, status)
		}
	}
	// A loaded machine may give an attempt or two back meanwhile (one a
	// second).
	if unauthorized < 10 || unauthorized > 40 || limited != flood-unauthorized {
		t.Fatalf("%d refused with 401, %d with 429; want 10 (and a few per second) then 429", unauthorized, limited)
	}
	if status, _ := loginFrom(t, c, h, `{"token":"`+h.Token+`"}`); status != http.StatusTooManyRequests {
		t.Fatalf("the right token from the flooding address: %d, want 429 until it has waited", status)
	}
	other := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	defer other.CloseIdleConnections()
	if status, _ := loginFrom(t, other, h, `{"token":"`+h.Token+`"}`); status != http.StatusOK {
		t.Fatalf("the right token from another address: %d", status)
	}

	grown := len(logs.String()) - before
	h.Stop() // logs what the summary still held
	out := logs.String()[before:]
	lines := strings.Count(out, "refused attempts to present the token")
	if lines < 1 || lines > 3 || grown > 2048 {
		t.Fatalf("the flood wrote %d bytes and %d summary lines during it:\n%s", grown, lines, out)
	}
	if strings.Count(out, "\n") > 10 {
		t.Fatalf("the flood and the stop logged %d lines:\n%s", strings.Count(out, "\n"), out)
	}
	var wrong, lim int
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "refused attempts to present the token") {
			continue
		}
		wrong += field(t, l, "wrong_token")
		lim += field(t, l, "rate_limited")
	}
	if wrong != unauthorized || lim != limited+1 {
		t.Fatalf("summaries count %d wrong and %d limited; the clients saw %d and %d", wrong, lim, unauthorized, limited+1)
	}
}

// field reads key=N from a text log line.
func field(t *testing.T, line, key string) int {
	t.Helper()
	_, rest, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		t.Fatalf("no %s in %q", key, line)
	}
	v, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q in %q", key, v, line)
	}
	return n
}
