package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reply is one raw HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// errCode returns the code of a contract §3 error body, failing the test
// if the body is not one.
func (r reply) errCode(t *testing.T) string {
	t.Helper()
	var e struct {
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", r.body, err)
	}
	if e.Error == nil || e.Error.Code == nil || e.Error.Message == nil {
		t.Fatalf("error body %q lacks error.code or error.message", r.body)
	}
	if *e.Error.Message == "" {
		t.Errorf("error body %q has an empty message", r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error answer has Content-Type %q", ct)
	}
	return *e.Error.Code
}

// decode unmarshals the body into v.
func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

// req describes one raw request. A zero contentType on a state-changing
// method means application/json; use noCT to send none.
type req struct {
	method      string
	path        string
	body        string
	contentType string
	noCT        bool
	host        string
	origin      []string
	header      map[string]string // more headers (Authorization, Cookie)
}

// client is a dedicated client (no keep-alive) so no idle connection
// outlives a test.
var client = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true},
	Timeout:   20 * time.Second,
	// Tests see redirects (the login page's) as they are.
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func do(t *testing.T, h *servertest.Harness, r req) reply {
	t.Helper()
	var rd io.Reader
	if r.body != "" {
		rd = strings.NewReader(r.body)
	}
	hr, err := http.NewRequest(r.method, h.URL+r.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case r.noCT:
	case r.contentType != "":
		hr.Header.Set("Content-Type", r.contentType)
	case r.method != http.MethodGet && r.method != http.MethodHead:
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.host != "" {
		hr.Host = r.host
	}
	for _, o := range r.origin {
		hr.Header.Add("Origin", o)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	c := client
	if h.HTTP != http.DefaultClient {
		c = h.HTTP // TLS
	}
	resp, err := c.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", r.method, r.path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func get(t *testing.T, h *servertest.Harness, path string) reply {
	t.Helper()
	return do(t, h, req{method: "GET", path: path, header: harnessToken(h)})
}

// harnessToken is the Authorization header of h's token, if it has one.
func harnessToken(h *servertest.Harness) map[string]string {
	if h.Token == "" {
		return nil
	}
	return map[string]string{"Authorization": "Bearer " + h.Token}
}

func post(t *testing.T, h *servertest.Harness, path string, body any) reply {
	t.Helper()
	var s string
	switch b := body.(type) {
	case nil:
	case string:
		s = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		s = string(raw)
	}
	return do(t, h, req{method: "POST", path: path, body: s, header: harnessToken(h)})
}

// expectErr checks status and error code.
func expectErr(t *testing.T, r reply, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (body %s)", r.status, status, bytes.TrimSpace(r.body))
	}
	if got := r.errCode(t); got != code {
		t.Fatalf("code %q, want %q (body %s)", got, code, bytes.TrimSpace(r.body))
	}
}

// hostPort is the harness's host:port.
func hostPort(t *testing.T, h *servertest.Harness) string {
	t.Helper()
	u, err := url.Parse(h.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// sessionCount lists the sessions.
func sessionCount(t *testing.T, h *servertest.Harness) int {
	t.Helper()
	r := get(t, h, "/sessions")
	if r.status != http.StatusOK {
		t.Fatalf("list sessions: %d %s", r.status, r.body)
	}
	var l struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	r.decode(t, &l)
	return len(l.Sessions)
}

func withDemoDelay(d time.Duration) servertest.Option {
	return func(c *config.Config) { c.DemoDelay = d }
}
