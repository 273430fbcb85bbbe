package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/tool"
)

const articleHTML = `<!doctype html><html><head><title>The Title</title><style>p{color:red}</style><script>alert(1)</script></head>
<body><nav><a href="/home">Home</a> | <a href="/about">About</a></nav>
<article><h1>The Title</h1>
<p>Metis is a <strong>local</strong> agent server. It keeps <em>every</em> event; read <a href="/docs/intro">the introduction</a> first.
This paragraph is long enough to look like the body of an article to the extraction, which wants some text before it trusts a block.</p>
<h2>Install</h2>
<pre><code>go install ./cmd/metis
metis serve</code></pre>
<ul><li>one</li><li><p>two</p></li></ul>
<ol><li>first</li><li>second</li></ol>
<blockquote>A quoted line.</blockquote>
<p>Another paragraph of the article with enough words in it that the readability heuristics keep it as content rather than boilerplate, with <code>inline()</code> code.</p>
</article><footer>© someone</footer></body></html>`

func fetchServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, uint16) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	port, _ := netip.ParseAddrPort(srv.Listener.Addr().String())
	return srv, port.Port()
}

func fetch(t *testing.T, w tool.WebFetch, u string) (tool.Result, error) {
	t.Helper()
	return run(t, w, tool.Env{}, map[string]string{"url": u})
}

func TestWebFetchTurnsHTMLIntoMarkdown(t *testing.T) {
	srv, _ := fetchServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, articleHTML)
	})
	res, err := fetch(t, tool.WebFetch{AllowPrivate: true}, srv.URL+"/post")
	if err != nil {
		t.Fatal(err)
	}
	c := res.Content
	for _, want := range []string{"# The Title", "URL: " + srv.URL + "/post", "**local**", "*every*",
		"[the introduction](" + srv.URL + "/docs/intro)", "## Install", "```\ngo install ./cmd/metis\nmetis serve\n```",
		"- one\n- two\n\n1. first\n2. second\n\n", "> A quoted line.", "`inline()`"} {
		if !strings.Contains(c, want) {
			t.Errorf("lacks %q:\n%s", want, c)
		}
	}
	for _, not := range []string{"alert(1)", "color:red", "<p>", "About"} {
		if strings.Contains(c, not) {
			t.Errorf("holds %q:\n%s", not, c)
		}
	}
}

func TestWebFetchPassesTextAndJSONAndDescribesTheRest(t *testing.T) {
	srv, _ := fetchServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a.json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"a": [1, 2]}`)
		case "/a.txt":
			w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
			w.Write([]byte("caf\xe9\n"))
		case "/a.png":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
		case "/sniffed":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write([]byte("%PDF-1.7\n"))
		case "/big.txt":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(strings.Repeat("0123456789\n", tool.MaxFetchText/5)))
		}
	})
	w := tool.WebFetch{AllowPrivate: true}
	res, err := fetch(t, w, srv.URL+"/a.json")
	if err != nil || !strings.HasSuffix(res.Content, `{"a": [1, 2]}`) {
		t.Errorf("json: %q %v", res.Content, err)
	}
	res, err = fetch(t, w, srv.URL+"/a.txt")
	if err != nil || !strings.HasSuffix(res.Content, "café\n") {
		t.Errorf("latin-1 text: %q %v", res.Content, err)
	}
	for _, p := range []string{"/a.png", "/sniffed"} {
		res, err = fetch(t, w, srv.URL+p)
		if err != nil || !strings.Contains(res.Content, "text only") || strings.Contains(res.Content, "PNG") && p == "/a.png" && !strings.Contains(res.Content, "image/png") {
			t.Errorf("%s: %q %v", p, res.Content, err)
		}
	}
	if res, _ = fetch(t, w, srv.URL+"/sniffed"); !strings.Contains(res.Content, "application/pdf") {
		t.Errorf("sniffed type: %q", res.Content)
	}
	res, err = fetch(t, w, srv.URL+"/big.txt")
	if err != nil || len(res.Content) > tool.MaxFetchText+200 || !strings.Contains(res.Content, "[the text is cut at") {
		t.Errorf("big: %d bytes, %v", len(res.Content), err)
	}
}

func TestWebFetchLimits(t *testing.T) {
	srv, _ := fetchServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/huge":
			w.Header().Set("Content-Type", "text/plain")
			chunk := []byte(strings.Repeat("x", 1<<16))
			for range (tool.MaxFetchBytes >> 16) + 10 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/slow":
			<-r.Context().Done()
		case "/missing":
			http.Error(w, "no such page", http.StatusNotFound)
		default:
			n := 0
			fmt.Sscanf(r.URL.Path, "/loop%d", &n)
			http.Redirect(w, r, fmt.Sprintf("/loop%d", n+1), http.StatusFound)
		}
	})
	w := tool.WebFetch{AllowPrivate: true, Timeout: 300 * time.Millisecond}
	res, err := fetch(t, tool.WebFetch{AllowPrivate: true}, srv.URL+"/huge")
	if err != nil || !strings.Contains(res.Content, "only its start was read") {
		t.Errorf("huge: %v %q", err, res.Content[max(0, len(res.Content)-200):])
	}
	_, err = fetch(t, w, srv.URL+"/slow")
	wantClass(t, err, tool.ClassTimeout)
	_, err = fetch(t, w, srv.URL+"/missing")
	wantClass(t, err, tool.ClassExecution)
	if !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no such page") {
		t.Errorf("404: %v", err)
	}
	_, err = fetch(t, w, srv.URL+"/loop0")
	wantClass(t, err, tool.ClassExecution)
	if !strings.Contains(err.Error(), "redirects") {
		t.Errorf("loop: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tool.WebFetch{AllowPrivate: true}.Run(ctx, tool.Env{}, json.RawMessage(`{"url":"`+srv.URL+`/slow"}`))
	wantClass(t, err, tool.ClassCancelled)
}

// TestWebFetchRefusesThisMachineByDefault: the test server is on
// loopback, so the default web_fetch refuses it, by address, by name,
// and through a redirect from a server it may reach.
func TestWebFetchRefusesThisMachineByDefault(t *testing.T) {
	var hits atomic.Int32
	private, _ := fetchServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "secret admin page")
	})
	pu, _ := url.Parse(private.URL)
	_, port, _ := net.SplitHostPort(pu.Host)
	for _, u := range []string{private.URL, "http://localhost:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		_, err := fetch(t, tool.WebFetch{}, u)
		wantClass(t, err, tool.ClassPermissionDenied)
		if !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: %v", u, err)
		}
	}
	public, pubPort := fetchServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, private.URL+"/admin", http.StatusFound)
	})
	_, err := fetch(t, tool.WebFetchAllowing(pubPort), public.URL)
	wantClass(t, err, tool.ClassPermissionDenied)
	if hits.Load() != 0 {
		t.Fatalf("the refused server was reached %d times", hits.Load())
	}
	// The setting lets it through.
	res, err := fetch(t, tool.WebFetch{AllowPrivate: true}, public.URL)
	if err != nil || !strings.Contains(res.Content, "secret admin page") {
		t.Errorf("allowed: %q %v", res.Content, err)
	}
}

func TestWebFetchBadInput(t *testing.T) {
	for in, says := range map[string]string{
		`{}`:                                                  "url is required",
		`{"url":""}`:                                          "url is required",
		`{"url":5}`:                                           "not a valid object",
		`{"url":"ftp://example.com/x"}`:                       "not supported",
		`{"url":"file:///etc/passwd"}`:                        "not supported",
		`{"url":"javascript:alert(1)"}`:                       "not supported",
		`{"url":"example.com/page"}`:                          "no scheme",
		`{"url":"http://"}`:                                   "no host",
		`{"url":"http://user:pw@example.com/"}`:               "user name or password",
		`{"url":"http://[::1"}`:                               "does not parse",
		`{"url":"http://169.254.169.254/latest/"}`:            "link-local",
		`{"url":"http://100.100.100.200/latest/"}`:            "shared",
		`{"url":"http://[::ffff:10.0.0.1]/"}`:                 "private",
		`{"url":"http://0.0.0.0:8421/sessions"}`:              "unspecified",
		`{"url":"http://[fe80::1%25eth0]:80/"}`:               "link-local",
		`{"url":"https://` + strings.Repeat("a", 9000) + `"}`: "limit",
	} {
		_, err := tool.WebFetch{}.Run(context.Background(), tool.Env{}, json.RawMessage(in))
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v does not say %q", truncate(in, 60), err, says)
		}
	}
}

func truncate(s string, n int) string { return s[:min(len(s), n)] }

func TestAddrRefused(t *testing.T) {
	for _, c := range []struct {
		addr    string
		refused bool
	}{
		{"127.0.0.1", true}, {"127.8.9.10", true}, {"::1", true}, {"0.0.0.0", true}, {"::", true},
		{"10.1.2.3", true}, {"172.16.0.1", true}, {"172.31.255.255", true}, {"192.168.0.1", true},
		{"169.254.169.254", true}, {"fe80::1", true}, {"fc00::1", true}, {"fd12:3456::1", true},
		{"100.64.0.1", true}, {"100.100.100.200", true}, {"100.127.255.255", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:100.100.100.200", true}, {"::ffff:169.254.169.254", true},
		{"224.0.0.1", true}, {"ff02::1", true}, {"255.255.255.255", true}, {"240.0.0.1", true},
		{"64:ff9b::7f00:1", true}, {"2002:a9fe:a9fe::1", true}, {"::127.0.0.1", true}, {"fec0::1", true},
		{"198.18.0.1", true}, {"192.0.0.8", true},
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"100.128.0.1", false}, {"172.32.0.1", false},
		{"2606:4700:4700::1111", false}, {"::ffff:8.8.8.8", false}, {"64:ff9b::808:808", false},
	} {
		a := netip.MustParseAddr(c.addr)
		if got := tool.AddrRefused(a) != ""; got != c.refused {
			t.Errorf("%s: refused %v, want %v (%q)", c.addr, got, c.refused, tool.AddrRefused(a))
		}
	}
}

func TestWebFetchKindAndTargets(t *testing.T) {
	if tool.KindOf(tool.WebFetch{}) != tool.KindFetch {
		t.Error("web_fetch is not a fetch")
	}
	got, err := tool.WebFetch{}.Targets(json.RawMessage(`{"url":" https://example.com/a?b=c "}`))
	if err != nil || len(got) != 1 || got[0] != "https://example.com/a?b=c" {
		t.Errorf("targets %v %v", got, err)
	}
	if _, err := (tool.WebFetch{}).Targets(json.RawMessage(`{"url":"gopher://x"}`)); err == nil {
		t.Error("a gopher URL has targets")
	}
}

// FuzzWebFetchChecks: the URL check and the address check never panic;
// an accepted URL is http(s) with a host; an IPv4 address and its
// IPv4-mapped IPv6 form are judged alike.
func FuzzWebFetchChecks(f *testing.F) {
	for _, s := range []string{"https://example.com/", "http://[::ffff:127.0.0.1]/", "ftp://x", "HTTP://A", "http://%zz", "//host/path", "http://a@b"} {
		f.Add(s, []byte{127, 0, 0, 1})
	}
	f.Fuzz(func(t *testing.T, u string, ip []byte) {
		in, _ := json.Marshal(map[string]string{"url": u})
		got, err := tool.WebFetch{}.Targets(in)
		if err == nil {
			p, perr := url.Parse(got[0])
			if perr != nil || (p.Scheme != "http" && p.Scheme != "https" && !strings.EqualFold(p.Scheme, "http") && !strings.EqualFold(p.Scheme, "https")) || p.Hostname() == "" {
				t.Fatalf("accepted %q as %q", u, got[0])
			}
		} else if tool.ClassOf(err) != tool.ClassInvalidInput {
			t.Fatalf("%q: class %s", u, tool.ClassOf(err))
		}
		if len(ip) >= 4 {
			v4 := netip.AddrFrom4([4]byte(ip[:4]))
			mapped := netip.AddrFrom16(v4.As16())
			if (tool.AddrRefused(v4) == "") != (tool.AddrRefused(mapped) == "") {
				t.Fatalf("%s and %s judged differently", v4, mapped)
			}
		}
		if len(ip) >= 16 {
			_ = tool.AddrRefused(netip.AddrFrom16([16]byte(ip[:16])))
		}
	})
}
