package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	readability "codeberg.org/readeck/go-readability/v2"
	"github.com/gabriel-vasile/mimetype"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"

	"github.com/metis-agent/metis/internal/model"
)

// Limits of web_fetch.
const (
	// MaxFetchBytes is the most of a response body read.
	MaxFetchBytes = 5 << 20
	// MaxFetchText is the most text returned to the model.
	MaxFetchText = 100 << 10
	// DefaultFetchTimeout bounds a whole fetch, redirects included.
	DefaultFetchTimeout = 30 * time.Second
	// maxFetchRedirects is the most redirects followed.
	maxFetchRedirects = 5
	// maxURLBytes bounds the URL.
	maxURLBytes = 8 << 10
)

// WebFetch fetches a web page and returns its readable text (web_fetch).
type WebFetch struct {
	// AllowPrivate lets it reach loopback, private, link-local and the
	// other non-public addresses (refused by default).
	AllowPrivate bool
	// Timeout bounds a fetch (0: DefaultFetchTimeout).
	Timeout time.Duration
	// allow, in tests, lets chosen addresses through.
	allow func(netip.AddrPort) bool
}

// Spec implements Tool.
func (WebFetch) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "web_fetch",
		Description: "Fetch a web page (http or https GET) and return its readable text as Markdown: the article's title, headings, paragraphs, lists, links and code, without navigation, scripts or styles. " +
			"Plain text and JSON come back as they are; other content (images, PDFs, archives) is only described. At most 100 KiB of text; addresses of this machine and of private networks are refused.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","description":"the http:// or https:// URL to fetch"}},"required":["url"]}`)}
}

// Kind implements Classified.
func (WebFetch) Kind() Kind { return KindFetch }

type fetchInput struct {
	URL *string `json:"url"`
}

// Targets implements Targeted: the URL.
func (WebFetch) Targets(input json.RawMessage) ([]string, error) {
	var in fetchInput
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	u, err := checkFetchURL(in.URL)
	if err != nil {
		return nil, err
	}
	return []string{u.String()}, nil
}

// checkFetchURL validates the URL the model gave.
func checkFetchURL(raw *string) (*url.URL, error) {
	if raw == nil || strings.TrimSpace(*raw) == "" {
		return nil, Errorf(ClassInvalidInput, "url is required: an http:// or https:// URL")
	}
	s := strings.TrimSpace(*raw)
	if len(s) > maxURLBytes {
		return nil, Errorf(ClassInvalidInput, "the URL is %d bytes; the limit is %d", len(s), maxURLBytes)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, Errorf(ClassInvalidInput, "the URL does not parse: %v", err)
	}
	if err := checkScheme(u); err != nil {
		return nil, err
	}
	return u, nil
}

// checkScheme accepts absolute http and https URLs with a host and no
// credentials (of the first URL and of every redirect).
func checkScheme(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return Errorf(ClassInvalidInput, "%q has no scheme: give a full URL starting with https://", truncateLine(u.String(), 200))
	default:
		return Errorf(ClassInvalidInput, "the scheme %q is not supported: web_fetch fetches http:// and https:// URLs", u.Scheme)
	}
	if u.Hostname() == "" {
		return Errorf(ClassInvalidInput, "%q has no host", truncateLine(u.String(), 200))
	}
	if u.User != nil {
		return Errorf(ClassInvalidInput, "URLs with a user name or password are not fetched")
	}
	return nil
}

// client builds the HTTP client of one fetch: no proxy (the addresses
// checked are those dialled), the address check on every connection,
// redirects checked and bounded.
func (w WebFetch) client() *http.Client {
	var allow func(netip.AddrPort) bool
	switch {
	case w.AllowPrivate:
		allow = func(netip.AddrPort) bool { return true }
	case w.allow != nil:
		allow = w.allow
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: dialControl(allow)}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  20 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           1,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > maxFetchRedirects {
			return Errorf(ClassExecution, "more than %d redirects", maxFetchRedirects)
		}
		return checkScheme(req.URL)
	}}
}

// Run implements Tool.
func (w WebFetch) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	var in fetchInput
	if err := decodeInput(input, &in); err != nil {
		return Result{}, err
	}
	u, err := checkFetchURL(in.URL)
	if err != nil {
		return Result{}, err
	}
	// A literal address is refused before any connection, with the
	// same words.
	if a, err := netip.ParseAddr(u.Hostname()); err == nil && !w.AllowPrivate && (w.allow == nil || !w.allow(netip.AddrPortFrom(a, urlPort(u)))) {
		if why := addrRefused(a); why != "" {
			return Result{}, Errorf(ClassPermissionDenied, "%v", &errRefusedAddr{addr: a.WithZone(""), why: why})
		}
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultFetchTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Result{}, Errorf(ClassInvalidInput, "the URL cannot be requested: %v", err)
	}
	req.Header.Set("User-Agent", "metis-web-fetch/1 (+https://github.com/metis-agent/metis)")
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain,text/markdown,application/json;q=0.9,*/*;q=0.5")
	cl := w.client()
	defer cl.CloseIdleConnections()
	resp, err := cl.Do(req)
	if err != nil {
		return Result{}, fetchError(ctx, u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxFetchBytes+1))
	if err != nil {
		return Result{}, fetchError(ctx, u, err)
	}
	cut := len(body) > MaxFetchBytes
	if cut {
		body = body[:MaxFetchBytes]
	}
	final := resp.Request.URL
	if resp.StatusCode >= 400 {
		excerpt := strings.TrimSpace(truncateLine(strings.ToValidUTF8(string(body), ""), 300))
		return Result{}, Errorf(ClassExecution, "%s answered HTTP %s: %s", final, resp.Status, excerpt)
	}
	return renderFetched(final, resp.Header.Get("Content-Type"), body, cut), nil
}

// urlPort is the port a URL connects to.
func urlPort(u *url.URL) uint16 {
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if strings.EqualFold(u.Scheme, "https") {
		return 443
	}
	return 80
}

// fetchError classifies a failed request.
func fetchError(ctx context.Context, u *url.URL, err error) error {
	var refused *errRefusedAddr
	var te *Error
	var dns *net.DNSError
	switch {
	case errors.As(err, &refused):
		return Errorf(ClassPermissionDenied, "fetch %s: %v", u, refused)
	case errors.As(err, &te):
		return te
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return Errorf(ClassTimeout, "fetch %s: no complete answer in time", u)
	case ctx.Err() != nil:
		return Errorf(ClassCancelled, "fetch %s: cancelled", u)
	case errors.As(err, &dns):
		return Errorf(ClassExecution, "fetch %s: the host name does not resolve (%s)", u, dns.Err)
	}
	return Errorf(ClassExecution, "fetch %s: %v", u, err)
}

// renderFetched turns a response body into what the model reads.
func renderFetched(u *url.URL, contentType string, body []byte, cut bool) Result {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt == "" || mt == "application/octet-stream" {
		m := mimetype.Detect(body)
		mt, params, _ = mime.ParseMediaType(m.String())
	}
	var text, title string
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		title, text = readable(u, body, contentType)
	case isTextType(mt):
		text = decodeText(body, contentType, params["charset"])
	default:
		return Result{Content: fmt.Sprintf("%s is %s (%d bytes%s); web_fetch returns text only, so its content is not shown.", u, mt, len(body), cutNote(cut)),
			Summary: fmt.Sprintf("fetched %s: %s, not shown", u, mt)}
	}
	var sb strings.Builder
	if title != "" {
		sb.WriteString("# " + title + "\n\n")
	}
	fmt.Fprintf(&sb, "URL: %s\n\n", u)
	head := sb.Len()
	sb.WriteString(text)
	out := sb.String()
	note := ""
	if len(out) > MaxFetchText {
		out = truncateUTF8(out, MaxFetchText)
		note = fmt.Sprintf("\n[the text is cut at %d bytes of %d]", MaxFetchText, head+len(text))
	}
	if cut {
		note += fmt.Sprintf("\n[the page is larger than %d bytes: only its start was read]", MaxFetchBytes)
	}
	return Result{Content: out + note, Summary: fmt.Sprintf("fetched %s (%s, %d bytes)", u, mt, len(body))}
}

func cutNote(cut bool) string {
	if cut {
		return " or more"
	}
	return ""
}

// isTextType says which media types pass through as text.
func isTextType(mt string) bool {
	switch {
	case strings.HasPrefix(mt, "text/"),
		mt == "application/json", strings.HasSuffix(mt, "+json"),
		mt == "application/xml", strings.HasSuffix(mt, "+xml"),
		mt == "application/javascript", mt == "application/x-javascript", mt == "application/ecmascript",
		mt == "application/x-sh", mt == "application/x-yaml", mt == "application/yaml", mt == "application/toml":
		return true
	}
	return false
}

// decodeText returns body as UTF-8, decoding the charset it is in.
func decodeText(body []byte, contentType, cs string) string {
	if cs == "" || strings.EqualFold(cs, "utf-8") || strings.EqualFold(cs, "us-ascii") {
		if utf8.Valid(body) {
			return string(body)
		}
	}
	r, err := charset.NewReader(strings.NewReader(string(body)), contentType)
	if err == nil {
		if b, err := io.ReadAll(r); err == nil {
			return string(b)
		}
	}
	return strings.ToValidUTF8(string(body), "\uFFFD")
}

// readable extracts a page's article (or its whole body when that
// fails) and renders it as Markdown.
func readable(u *url.URL, body []byte, contentType string) (string, string) {
	page := decodeText(body, contentType, "")
	if !strings.Contains(strings.ToLower(contentType), "charset") {
		// The charset may be declared in the page itself.
		if r, err := charset.NewReader(strings.NewReader(string(body)), "text/html"); err == nil {
			if b, err := io.ReadAll(r); err == nil {
				page = string(b)
			}
		}
	}
	art, err := readability.FromReader(strings.NewReader(page), u)
	if err == nil && art.Node != nil {
		if md := htmlToMarkdown(art.Node, u); strings.TrimSpace(md) != "" {
			return strings.TrimSpace(art.Title()), md
		}
	}
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		return "", strings.ToValidUTF8(page, "\uFFFD")
	}
	return "", htmlToMarkdown(doc, u)
}
