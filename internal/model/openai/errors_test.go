package openai

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/model"
)

var textDeltas = []model.Delta{text(0, "Hello"), text(0, "! How"), text(0, " can I"), text(0, " help 🙂"), text(0, " you today?"), stop(0)}

func TestRetry429BeforeStream(t *testing.T) {
	fs := newServer(t,
		serveStatus(http.StatusTooManyRequests, map[string]string{"Retry-After-Ms": "60", "Retry-After": "1"},
			`{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000, Used 30000.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`),
		replay(t, "text.sse"))
	began := time.Now()
	got, res, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	if fs.requests() != 2 {
		t.Errorf("server saw %d requests, want 2", fs.requests())
	}
	checkDeltas(t, got, textDeltas) // no duplicates
	if res.StopReason != model.StopEndTurn {
		t.Errorf("stop %q", res.StopReason)
	}
	if d := time.Since(began); d < 60*time.Millisecond {
		t.Errorf("retried after %s; the server asked for 60ms", d)
	}
}

func TestInsufficientQuotaNotRetried(t *testing.T) {
	fs := newServer(t, serveStatus(http.StatusTooManyRequests, nil,
		`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
	_, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	me := asModelError(t, err)
	if me.Class != model.ClassRateLimited || me.Retryable || fs.requests() != 1 || !strings.Contains(me.Message, "billing") {
		t.Errorf("%+v after %d requests", me, fs.requests())
	}
}

func TestAuth401NotRetried(t *testing.T) {
	fs := newServer(t, serveStatus(http.StatusUnauthorized, nil,
		`{"error":{"message":"Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`))
	got, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	me := asModelError(t, err)
	if me.Class != model.ClassAuth || me.Retryable {
		t.Errorf("class %s retryable %v", me.Class, me.Retryable)
	}
	if !strings.Contains(me.Message, "OPENAI_API_KEY") {
		t.Errorf("message %q does not say what to check", me.Message)
	}
	if fs.requests() != 1 || len(got) != 0 {
		t.Errorf("%d requests, %d deltas", fs.requests(), len(got))
	}
	if c, _ := model.Classify(err); c != model.ClassAuth {
		t.Errorf("Classify: %s", c)
	}
}

func TestServerError500BeforeStreamRetried(t *testing.T) {
	fs := newServer(t,
		serveStatus(http.StatusInternalServerError, nil, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`),
		replay(t, "text.sse"))
	got, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	if fs.requests() != 2 {
		t.Errorf("%d requests", fs.requests())
	}
	checkDeltas(t, got, textDeltas)
}

func TestServerErrorsExhaustRetries(t *testing.T) {
	fs := newServer(t, serveStatus(http.StatusBadGateway, map[string]string{"Content-Type": "text/html"}, "<html>502 Bad Gateway</html>"))
	_, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	me := asModelError(t, err)
	if me.Class != model.ClassProviderError || fs.requests() != 3 || !strings.Contains(me.Message, "502") {
		t.Errorf("%+v after %d requests", me, fs.requests())
	}
}

func TestErrorEventBeforeFirstDeltaRetried(t *testing.T) {
	fs := newServer(t, replay(t, "error_first.sse"), replay(t, "text.sse"))
	got, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	if fs.requests() != 2 {
		t.Errorf("%d requests", fs.requests())
	}
	checkDeltas(t, got, textDeltas)
}

func TestErrorEventAfterDeltasNotRetried(t *testing.T) {
	fs := newServer(t, replay(t, "error_midstream.sse"), replay(t, "text.sse"))
	got, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	me := asModelError(t, err)
	if me.Class != model.ClassProviderError || me.Retryable {
		t.Errorf("class %s retryable %v", me.Class, me.Retryable)
	}
	if !strings.Contains(me.Message, "The server had an error") {
		t.Errorf("message %q", me.Message)
	}
	if fs.requests() != 1 {
		t.Errorf("%d requests; an error after deltas must not be retried", fs.requests())
	}
	checkDeltas(t, got, []model.Delta{text(0, "Let me"), text(0, " think")})
}

func TestIdleStreamTimesOut(t *testing.T) {
	h := newHolder()
	fs := newServer(t, h.handler(events(t, "text.sse")[:2]...))
	a := fs.adapter(t, func(o *Options) { o.IdleTimeout = 100 * time.Millisecond })
	began := time.Now()
	got, _, _, err := run(t, a, context.Background(), simpleReq())
	me := asModelError(t, err)
	if me.Class != model.ClassTimeout || me.Retryable {
		t.Errorf("class %s retryable %v: %v", me.Class, me.Retryable, err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("took %s", d)
	}
	checkDeltas(t, got, []model.Delta{text(0, "Hello")})
	h.waitGone(t)
	if fs.requests() != 1 {
		t.Errorf("%d requests", fs.requests())
	}
}

func TestIdleBeforeHeadersTimesOut(t *testing.T) {
	gone := make(chan struct{})
	fs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		gone <- struct{}{}
	})
	a := fs.adapter(t, func(o *Options) {
		o.IdleTimeout = 80 * time.Millisecond
		o.Retry.Attempts = 1
	})
	_, _, _, err := run(t, a, context.Background(), simpleReq())
	if me := asModelError(t, err); me.Class != model.ClassTimeout {
		t.Errorf("class %s: %v", me.Class, err)
	}
	select {
	case <-gone:
	case <-time.After(3 * time.Second):
		t.Fatal("request not aborted")
	}
}

func TestConnectionRefusedNamesTheBaseURL(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/v1"
	srv.Close()
	a, err := New(Options{BaseURL: url, HTTPClient: testClient(t), Logger: quietLogger(),
		Retry: model.RetryPolicy{Attempts: 2, Base: time.Millisecond, Max: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = run(t, a, context.Background(), simpleReq())
	me := asModelError(t, err)
	if me.Class != model.ClassNetwork || !me.Retryable {
		t.Errorf("class %s retryable %v", me.Class, me.Retryable)
	}
	if !strings.Contains(me.Message, url) || !strings.Contains(me.Message, "running") {
		t.Errorf("message %q should name %s and suggest checking the server runs", me.Message, url)
	}
}

func TestModelNotFoundNamesTheModel(t *testing.T) {
	for name, body := range map[string]string{
		"openai": `{"error":{"message":"The model ` + "`gpt-9`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
		"ollama": `{"error":{"message":"model \"gpt-9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`,
		"route":  `404 page not found`,
	} {
		t.Run(name, func(t *testing.T) {
			fs := newServer(t, serveStatus(http.StatusNotFound, map[string]string{"Content-Type": "text/plain"}, body))
			req := simpleReq()
			req.Model = "openai:gpt-9"
			_, _, _, err := run(t, fs.adapter(t, nil), context.Background(), req)
			me := asModelError(t, err)
			if me.Class != model.ClassInvalidRequest || me.Retryable || fs.requests() != 1 {
				t.Errorf("%+v after %d requests", me, fs.requests())
			}
			if !strings.Contains(me.Message, `"gpt-9"`) {
				t.Errorf("message %q does not name the model", me.Message)
			}
			if name == "route" && !strings.Contains(me.Message, "OPENAI_BASE_URL") {
				t.Errorf("message %q does not point at the base URL", me.Message)
			}
		})
	}
}

func TestStatusClasses(t *testing.T) {
	for _, c := range []struct {
		status    int
		class     string
		retryable bool
	}{
		{400, model.ClassInvalidRequest, false},
		{403, model.ClassAuth, false},
		{413, model.ClassInvalidRequest, false},
		{422, model.ClassInvalidRequest, false},
		{503, model.ClassOverloaded, true},
		{529, model.ClassOverloaded, true},
	} {
		fs := newServer(t, serveStatus(c.status, nil, `{"object":"error","message":"nope","type":"BadRequestError","param":null,"code":400}`))
		_, _, _, err := run(t, fs.adapter(t, func(o *Options) { o.Retry.Attempts = 1 }), context.Background(), simpleReq())
		me := asModelError(t, err)
		if me.Class != c.class || me.Retryable != c.retryable || !strings.Contains(me.Message, "nope") {
			t.Errorf("%d: %+v", c.status, me)
		}
	}
}

func TestNotStreamedJSONAnswer(t *testing.T) {
	fs := newServer(t, serveStatus(http.StatusOK, nil, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	_, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	me := asModelError(t, err)
	if me.Class != model.ClassProviderError || fs.requests() != 1 || !strings.Contains(me.Message, "without streaming") {
		t.Errorf("%+v after %d requests", me, fs.requests())
	}
}

func TestMalformedChunk(t *testing.T) {
	fs := newServer(t, serveEvents(textChunk("a"), "data: {not json\n\n"))
	got, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	me := asModelError(t, err)
	if me.Class != model.ClassProviderError || me.Retryable || len(got) != 1 {
		t.Errorf("%+v, %d deltas", me, len(got))
	}
}

func TestNewNeedsKeyOrBaseURL(t *testing.T) {
	_, err := New(Options{})
	var me *model.Error
	if !errors.As(err, &me) || me.Class != model.ClassUnavailable ||
		me.Message != "set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)" {
		t.Errorf("New without key and URL: %v", err)
	}
	if _, err := New(Options{BaseURL: "localhost:11434"}); err == nil {
		t.Error("a base URL without scheme was accepted")
	}
	if _, err := New(Options{BaseURL: "http://localhost:11434/v1"}); err != nil {
		t.Errorf("local server without key: %v", err)
	}
	a, err := New(Options{APIKey: "sk-x"})
	if err != nil || !a.official || a.endpoint != DefaultBaseURL || a.idle != DefaultIdleTimeout {
		t.Errorf("defaults: %+v %v", a, err)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	for _, c := range []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"Retry-After": "2"}, 2 * time.Second},
		{map[string]string{"Retry-After-Ms": "150", "Retry-After": "2"}, 150 * time.Millisecond},
		{map[string]string{"Retry-After": "soon"}, 0},
		{nil, 0},
	} {
		h := http.Header{}
		for k, v := range c.h {
			h.Set(k, v)
		}
		if got := (&httpError{Header: h}).RetryAfter(); got != c.want {
			t.Errorf("%v: %s, want %s", c.h, got, c.want)
		}
	}
	h := http.Header{}
	h.Set("Retry-After", time.Now().Add(time.Minute).UTC().Format(http.TimeFormat))
	if got := (&httpError{Header: h}).RetryAfter(); got < 50*time.Second || got > time.Minute {
		t.Errorf("HTTP date: %s", got)
	}
}

func TestEventStreamWithJSONContentType(t *testing.T) {
	evs := events(t, "text.sse")
	fs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for _, e := range evs {
			writeEvent(w, e)
		}
	})
	got, _, _, err := run(t, fs.adapter(t, nil), context.Background(), simpleReq())
	if err != nil {
		t.Fatal(err)
	}
	checkDeltas(t, got, textDeltas)
}

func TestHangingErrorBodyTimesOut(t *testing.T) {
	h := newHolder()
	fs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":`))
		w.(http.Flusher).Flush()
		close(h.reached)
		<-r.Context().Done()
		close(h.gone)
	})
	a := fs.adapter(t, func(o *Options) {
		o.IdleTimeout = 80 * time.Millisecond
		o.Retry.Attempts = 1
	})
	_, _, _, err := run(t, a, context.Background(), simpleReq())
	if me := asModelError(t, err); me.Class != model.ClassTimeout {
		t.Errorf("class %s: %v", me.Class, err)
	}
	h.waitGone(t)
}
