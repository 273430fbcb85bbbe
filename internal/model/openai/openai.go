package openai

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/metis-agent/metis/internal/model"
)

// Provider is the provider name of this adapter: model ids "openai:NAME".
const Provider = "openai"

// DefaultBaseURL is used when Options.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultIdleTimeout is used when Options.IdleTimeout is not positive.
const DefaultIdleTimeout = 90 * time.Second

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// Options configure an Adapter.
type Options struct {
	// APIKey is sent as a bearer token. It may be empty only when BaseURL
	// is set: local servers (Ollama, vLLM, llama.cpp) usually need none.
	APIKey string
	// BaseURL is the API root, e.g. http://localhost:11434/v1; requests go
	// to BaseURL + "/chat/completions". Empty means DefaultBaseURL.
	BaseURL string
	// HTTPClient performs the requests (nil: a client of its own). It
	// must not set a Timeout shorter than a whole stream.
	HTTPClient *http.Client
	// IdleTimeout fails a call whose server sends no byte for this long,
	// waiting for the response headers included (default 90s).
	IdleTimeout time.Duration
	// Retry retries calls that failed before their first delta.
	Retry model.RetryPolicy
	// Logger receives warnings about odd streams and retries (nil:
	// slog.Default()).
	Logger *slog.Logger
}

// Adapter runs openai:* model calls. It is safe for concurrent use.
type Adapter struct {
	opts     []option.RequestOption // of every request
	models   sdk.ModelService
	endpoint string // the base URL, for messages
	official bool   // endpoint is api.openai.com
	idle     time.Duration
	retry    model.RetryPolicy
	log      *slog.Logger
}

var _ model.Adapter = (*Adapter)(nil)

// New returns an adapter, or an *model.Error of class model_unavailable
// saying what to set.
func New(opts Options) (*Adapter, error) {
	key := strings.TrimSpace(opts.APIKey)
	base := strings.TrimSpace(opts.BaseURL)
	if key == "" && base == "" {
		return nil, &model.Error{Class: model.ClassUnavailable,
			Message: "set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)"}
	}
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &model.Error{Class: model.ClassUnavailable,
			Message: fmt.Sprintf("OPENAI_BASE_URL %q is not an http(s) URL; a local server looks like http://localhost:11434/v1", base)}
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{}
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			client.Transport = t.Clone()
		}
	}
	a := &Adapter{
		endpoint: strings.TrimRight(base, "/"),
		official: strings.EqualFold(u.Hostname(), "api.openai.com"),
		idle:     opts.IdleTimeout,
		retry:    opts.Retry,
		log:      opts.Logger,
	}
	if a.idle <= 0 {
		a.idle = DefaultIdleTimeout
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	reqOpts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(client),
		option.WithMaxRetries(0), // model.RetryPolicy decides
	}
	if key != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(key))
	}
	// The model service and each request's client (attempt) are built
	// from these options, not by sdk.NewClient: NewClient also reads
	// OPENAI_* from the environment, and here only Options count.
	a.opts = reqOpts
	a.models = sdk.NewModelService(reqOpts...)
	return a, nil
}

// Stream implements model.Adapter. A failure before the first delta is
// retried by Options.Retry when its class allows (429 honouring
// Retry-After, 5xx, network errors, an error event before any delta);
// 400/404/422, 401/403 and idle timeouts are not. Cancelling ctx aborts
// the HTTP stream at once and returns an error wrapping ctx.Err(); an
// error from emit stops the stream and is returned as is.
func (a *Adapter) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	params, err := a.params(req)
	if err != nil {
		return model.Result{}, err
	}
	var tr *translator
	err = a.retry.Do(ctx, func(attempt int) (bool, error) {
		var err error
		tr, err = a.attempt(ctx, params, emit)
		if err != nil && !tr.Emitted && ctx.Err() == nil {
			var me *model.Error
			if errors.As(err, &me) && me.Retryable {
				a.log.Warn("openai call failed before streaming; it may be retried",
					"model", req.Model, "attempt", attempt, "class", me.Class, "error", me.Message)
			}
		}
		return tr.Emitted, err
	})
	res := tr.result()
	switch {
	case err == nil:
		return res, nil
	case tr.Err != nil:
		return res, tr.Err
	case ctx.Err() != nil:
		return res, fmt.Errorf("openai: %s: %w", req.Model, ctx.Err())
	}
	return res, err
}

// errIdle is the cause of a timeout error.
var errIdle = errors.New("idle timeout: no data from the server")

// attemptState is shared between one attempt and its HTTP middleware.
type attemptState struct {
	idle atomic.Bool // the idle timer fired and cancelled the attempt
}

// attempt performs one HTTP request and translates its stream. The
// translator tells whether a delta was emitted and what emit returned.
func (a *Adapter) attempt(ctx context.Context, params sdk.ChatCompletionNewParams, emit func(model.Delta) error) (*translator, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &attemptState{}
	onIdle := func() {
		st.idle.Store(true)
		cancel()
	}
	mw := func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		// Waiting for the response headers counts as idle time too: a
		// server that accepts the connection and never answers fails the
		// same way as one that stops mid-stream.
		wait := time.AfterFunc(a.idle, onIdle)
		resp, err := next(r)
		wait.Stop()
		if err != nil {
			return resp, err
		}
		// From here every read of the body is guarded, error bodies too.
		resp.Body = model.NewIdleReader(resp.Body, a.idle, onIdle)
		if resp.StatusCode >= 400 {
			return nil, readHTTPError(resp, resp.Body)
		}
		if isJSON(resp.Header.Get("Content-Type")) {
			// An answer without streaming (an error, or a server that
			// ignored stream: true), unless it is an event stream with
			// the wrong content type.
			br := bufio.NewReader(resp.Body)
			head, _ := br.Peek(5)
			if !bytes.HasPrefix(head, []byte("data:")) && !bytes.HasPrefix(head, []byte(":")) {
				he := readHTTPError(resp, br)
				if !he.hasError {
					he.notStreamed = true
				}
				return nil, he
			}
			resp.Body = readCloser{br, resp.Body}
		}
		return resp, nil
	}

	tr := newTranslator(ctx, emit, a.log)
	// The request is ChatCompletions.NewStreaming's (a POST of the params
	// with stream: true, through the SDK's client), and its events are
	// read by the SDK's stream reader; only their decoding differs (see
	// chunk).
	//
	// The client is a local value, never stored: an sdk.Client reachable
	// from the Adapter's type would link every service of the SDK and
	// its methods into the binary (about 22 MB more).
	var raw *http.Response
	client := sdk.Client{Options: a.opts}
	err := client.Post(actx, "chat/completions", params, &raw, option.WithJSONSet("stream", true), option.WithMiddleware(mw))
	stream := ssestream.NewStream[chunk](ssestream.NewDecoder(raw), err)
	defer stream.Close()
	for stream.Next() {
		if ctx.Err() != nil {
			break
		}
		c := stream.Current()
		if err := tr.chunk(&c); err != nil {
			return tr, err
		}
	}
	serr := stream.Err()
	switch {
	case ctx.Err() != nil:
		return tr, ctx.Err()
	case st.idle.Load():
		// Not wrapping serr: it is the attempt's context.Canceled, which
		// would make the timeout look like a cancellation.
		return tr, &model.Error{Class: model.ClassTimeout, Err: errIdle,
			Message: fmt.Sprintf("%s sent nothing for %s; the server may be overloaded or stuck (the limit is the model idle timeout)", a.endpoint, a.idle)}
	case serr != nil:
		return tr, a.classify(serr, string(params.Model), tr.Emitted)
	case !tr.sawChunk:
		return tr, &model.Error{Class: model.ClassProviderError, Retryable: true,
			Message: fmt.Sprintf("%s ended the stream without sending anything", a.endpoint)}
	}
	return tr, tr.finish()
}

// isJSON reports whether a content type is JSON (not an event stream).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

type readCloser struct {
	io.Reader
	io.Closer
}

// readHTTPError reads body (resp's, maybe buffered) and closes resp.
func readHTTPError(resp *http.Response, body io.Reader) *httpError {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	_ = resp.Body.Close()
	he := &httpError{Status: resp.StatusCode, Header: resp.Header.Clone()}
	he.parseBody(b)
	return he
}
