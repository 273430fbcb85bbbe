package anthropic

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/metis-agent/metis/internal/model"
)

// Provider is the provider name of Anthropic model ids ("anthropic:...").
const Provider = "anthropic"

// DefaultBaseURL is Anthropic's public API.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultIdleTimeout is how long a stream may stay silent before the call
// fails with class timeout.
const DefaultIdleTimeout = 90 * time.Second

// DefaultMaxTokens is the max_tokens of a request whose MaxTokens is 0.
const DefaultMaxTokens = 8192

// Options configure an Adapter.
type Options struct {
	// APIKey is the Anthropic API key (required).
	APIKey string
	// BaseURL is the API endpoint ("" means DefaultBaseURL).
	BaseURL string
	// HTTPClient sends the requests (nil: a client of its own). A client
	// Timeout would cut long streams short; rely on IdleTimeout instead.
	HTTPClient *http.Client
	// IdleTimeout fails a call whose stream sends nothing, pings included,
	// for this long; it also bounds the wait for response headers
	// (0: DefaultIdleTimeout).
	IdleTimeout time.Duration
	// Retry retries a call that fails before its first delta.
	Retry model.RetryPolicy
	// Logger receives retries and provider oddities (nil: slog.Default()).
	Logger *slog.Logger
}

// Adapter is the anthropic:* model adapter. It is safe for concurrent use.
type Adapter struct {
	client  sdk.Client
	baseURL string
	idle    time.Duration
	retry   model.RetryPolicy
	log     *slog.Logger
}

var _ model.Adapter = (*Adapter)(nil)

// New returns an adapter, or a *model.Error of class model_unavailable
// saying what to set.
func New(opts Options) (*Adapter, error) {
	if strings.TrimSpace(opts.APIKey) == "" {
		return nil, &model.Error{Class: model.ClassUnavailable,
			Message: "set ANTHROPIC_API_KEY (or providers.anthropic.api_key in config.yaml) to use anthropic:* models"}
	}
	base := strings.TrimSpace(opts.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &model.Error{Class: model.ClassUnavailable,
			Message: fmt.Sprintf("ANTHROPIC_BASE_URL %q is not an http(s) URL", base)}
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	a := &Adapter{
		baseURL: strings.TrimRight(base, "/"),
		idle:    opts.IdleTimeout,
		retry:   opts.Retry,
		log:     opts.Logger,
	}
	if a.idle <= 0 {
		a.idle = DefaultIdleTimeout
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.log = a.log.With("provider", Provider)
	a.client = sdk.NewClient(
		option.WithoutEnvironmentDefaults(), // metis resolves key and URL itself (config)
		option.WithAPIKey(opts.APIKey),
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // retries are RetryPolicy's, before the first delta only
	)
	return a, nil
}

// Stream implements model.Adapter.
func (a *Adapter) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	params, err := buildParams(req)
	if err != nil {
		return model.Result{}, err
	}
	var (
		res            model.Result
		emitFailed     bool
		windowExceeded bool
	)
	err = a.retry.Do(ctx, func(attempt int) (bool, error) {
		if attempt > 1 {
			a.log.Info("retrying model call", "model", req.Model, "attempt", attempt)
		}
		t := &translator{DeltaSink: model.DeltaSink{Ctx: ctx, Emit: emit}, log: a.log}
		err := a.attempt(ctx, params, t)
		res = model.Result{Usage: t.usage}
		if err == nil {
			res.StopReason = t.stopReason()
			windowExceeded = t.rawStop == stopWindowExceeded
		}
		emitFailed = t.Err != nil
		if err != nil && !emitFailed && ctx.Err() == nil {
			a.log.Debug("model call attempt failed", "model", req.Model, "attempt", attempt, "err", err)
		}
		return t.Emitted, err
	})
	if err != nil {
		if !emitFailed && ctx.Err() != nil {
			// Cancelled mid-stream, or during a retry's wait.
			err = fmt.Errorf("anthropic call aborted: %w", ctx.Err())
		}
		return res, err
	}
	if windowExceeded {
		// The answer ran into the end of the context window: what was
		// streamed stays, and the call counts as an overflow, which the
		// agent loop answers by compacting and calling again.
		return res, model.Overflow("the model ran into the end of its context window while answering (stop_reason model_context_window_exceeded)", 0, nil)
	}
	return res, nil
}

// attempt runs one HTTP request and translates its stream. It returns
// nil, the emit error as is, or a classified error.
func (a *Adapter) attempt(ctx context.Context, params sdk.MessageNewParams, t *translator) error {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var idle, responded atomic.Bool
	onIdle := func() {
		idle.Store(true)
		cancel()
	}
	watch := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		wait := time.AfterFunc(a.idle, onIdle) // the wait for headers counts as silence too
		resp, err := next(r)
		wait.Stop()
		if err != nil || resp == nil {
			return resp, err
		}
		responded.Store(true)
		if resp.Body != nil {
			resp.Body = model.NewIdleReader(resp.Body, a.idle, onIdle)
		}
		return resp, nil
	})

	// The request is Messages.NewStreaming's (a POST of the params with
	// stream: true, through the SDK's client), and its events are read by
	// the SDK's stream reader; only their decoding differs (see event).
	var raw *http.Response
	err := a.client.Post(actx, "v1/messages", params, &raw, option.WithJSONSet("stream", true), watch)
	stream := ssestream.NewStream[event](ssestream.NewDecoder(raw), err)
	defer stream.Close()
	for !t.done && stream.Next() {
		ev := stream.Current()
		if err := t.handle(&ev); err != nil {
			return err
		}
	}
	err = stream.Err()
	switch {
	case t.Err != nil:
		return t.Err
	case ctx.Err() != nil:
		return fmt.Errorf("anthropic call aborted: %w", ctx.Err())
	case idle.Load():
		// Err stays nil: the read failed with the cancellation the timeout
		// caused, and this must not look like the caller's cancellation.
		return &model.Error{Class: model.ClassTimeout,
			Message: fmt.Sprintf("the provider sent nothing for %s (Anthropic at %s); try again", fmtDuration(a.idle), a.baseURL)}
	case err != nil:
		return a.classify(err, t.Emitted, responded.Load())
	case !t.done:
		return &model.Error{Class: model.ClassNetwork, Retryable: !t.Emitted,
			Message: fmt.Sprintf("the stream from Anthropic at %s ended before message_stop; try again", a.baseURL)}
	}
	return nil
}

// fmtDuration prints whole seconds as "90s" rather than "1m30s".
func fmtDuration(d time.Duration) string {
	if d >= time.Second && d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
