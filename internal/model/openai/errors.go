package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/metis-agent/metis/internal/model"
)

// httpError is an error response of the server (status >= 400, or a JSON
// body where an event stream was expected). It carries the Retry-After
// hint for model.RetryPolicy.
type httpError struct {
	Status  int
	Header  http.Header
	Type    string // error.type
	Code    string // error.code (a string or a number on the wire)
	Message string // error.message, or the start of a non-JSON body

	hasError    bool // the body held an error
	notStreamed bool // a 2xx JSON body: the server ignored stream: true
}

func (e *httpError) Error() string {
	s := "HTTP " + strconv.Itoa(e.Status)
	if t := http.StatusText(e.Status); t != "" {
		s += " " + t
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// RetryAfter implements model.RetryAfter from the Retry-After-Ms and
// Retry-After headers (seconds or an HTTP date).
func (e *httpError) RetryAfter() time.Duration {
	if v := e.Header.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			return time.Duration(math.Min(ms, float64(time.Hour/time.Millisecond)) * float64(time.Millisecond))
		}
	}
	v := e.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && !math.IsInf(s, 0) {
			return time.Duration(math.Min(s, 3600) * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// errorBody is what servers put in an error: OpenAI's {"error": {...}},
// {"error": "text"} (Ollama's native style), or the fields at the top
// level (vLLM, FastAPI's {"detail": ...}).
type errorBody struct {
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Detail  json.RawMessage `json:"detail"`
}

type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// parseBody fills Type, Code and Message from a response body.
func (e *httpError) parseBody(body []byte) {
	typ, code, msg, ok := parseErrorJSON(body)
	if ok {
		e.Type, e.Code, e.Message, e.hasError = typ, code, msg, true
		return
	}
	if s := strings.TrimSpace(string(body)); s != "" && !json.Valid(body) {
		e.Message = clip(s, 300)
		e.hasError = true
	}
}

// parseErrorJSON extracts an error from a JSON body; ok is false when
// the body holds no error.
func parseErrorJSON(body []byte) (typ, code, msg string, ok bool) {
	var b errorBody
	if json.Unmarshal(body, &b) != nil {
		return "", "", "", false
	}
	if len(b.Error) > 0 && string(b.Error) != "null" {
		var o errorObject
		if json.Unmarshal(b.Error, &o) == nil {
			return o.Type, rawString(o.Code), clip(o.Message, 500), true
		}
		var s string
		if json.Unmarshal(b.Error, &s) == nil {
			return "", "", clip(s, 500), true
		}
		return "", "", clip(string(b.Error), 500), true
	}
	if b.Message != "" || len(b.Detail) > 0 {
		msg := b.Message
		if msg == "" {
			msg = rawString(b.Detail)
		}
		return b.Type, rawString(b.Code), clip(msg, 500), true
	}
	return "", "", "", false
}

// rawString renders a JSON string or number as text.
func rawString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// withDetail appends the server's own words to a message.
func withDetail(msg, detail string) string {
	if detail == "" {
		return msg
	}
	return msg + " (server said: " + detail + ")"
}

// classify turns a failed attempt's error into a *model.Error. Nothing is
// retryable once a delta was emitted.
func (a *Adapter) classify(err error, modelName string, emitted bool) error {
	me := a.classifyErr(err, modelName)
	if emitted {
		me.Retryable = false
	}
	return me
}

func (a *Adapter) classifyErr(err error, modelName string) *model.Error {
	var (
		he  *httpError
		se  *ssestream.StreamError
		ae  *sdk.Error
		dns *net.DNSError
		se1 *json.SyntaxError
		se2 *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &he):
		return a.fromHTTP(he, modelName)
	case errors.As(err, &ae):
		// Not expected (the middleware answers errors first), but keep
		// the status if the SDK produced one.
		return a.fromHTTP(&httpError{Status: ae.StatusCode, Type: ae.Type, Code: ae.Code, Message: ae.Message,
			Header: http.Header{}, hasError: true}, modelName)
	case errors.As(err, &se):
		return a.fromStreamError(se)
	case errors.Is(err, syscall.ECONNREFUSED):
		return &model.Error{Class: model.ClassNetwork, Retryable: true, Err: err,
			Message: fmt.Sprintf("could not connect to %s: connection refused. Is the server running? (a local server such as Ollama must be started; check OPENAI_BASE_URL)", a.endpoint)}
	case errors.As(err, &dns):
		return &model.Error{Class: model.ClassNetwork, Retryable: true, Err: err,
			Message: fmt.Sprintf("could not resolve the host of %s: check OPENAI_BASE_URL and the network", a.endpoint)}
	case errors.As(err, &se1), errors.As(err, &se2):
		return &model.Error{Class: model.ClassProviderError, Err: err,
			Message: fmt.Sprintf("%s sent a stream chunk that is not valid chat.completion.chunk JSON; is it an OpenAI-compatible server?", a.endpoint)}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &model.Error{Class: model.ClassNetwork, Retryable: true, Err: err,
			Message: fmt.Sprintf("lost the connection to %s", a.endpoint)}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return &model.Error{Class: model.ClassNetwork, Retryable: true, Err: err,
			Message: fmt.Sprintf("network error talking to %s", a.endpoint)}
	}
	return &model.Error{Class: model.ClassProviderError, Err: err,
		Message: fmt.Sprintf("the call to %s failed: %v", a.endpoint, err)}
}

// fromHTTP classifies an error response by status, with a message that
// says what to do.
func (a *Adapter) fromHTTP(he *httpError, modelName string) *model.Error {
	me := &model.Error{Err: he}
	code := strings.ToLower(he.Code + " " + he.Type)
	switch s := he.Status; {
	case he.notStreamed:
		me.Class = model.ClassProviderError
		me.Message = fmt.Sprintf("%s answered without streaming (it ignored stream: true); is it an OpenAI-compatible server?", a.endpoint)
	case s == http.StatusUnauthorized:
		me.Class = model.ClassAuth
		me.Message = withDetail(fmt.Sprintf("%s rejected the API key (401): check OPENAI_API_KEY", a.endpoint), he.Message)
	case s == http.StatusForbidden:
		me.Class = model.ClassAuth
		me.Message = withDetail(fmt.Sprintf("%s refused access (403): check that the OPENAI_API_KEY account may use model %q", a.endpoint, modelName), he.Message)
	case s == http.StatusNotFound:
		me.Class = model.ClassInvalidRequest
		switch {
		case (strings.Contains(code, "model") || strings.Contains(strings.ToLower(he.Message), "model")) && a.official:
			me.Message = withDetail(fmt.Sprintf("model %q was not found at %s (404): check the model name and that the OPENAI_API_KEY account may use it", modelName, a.endpoint), he.Message)
		case strings.Contains(code, "model") || strings.Contains(strings.ToLower(he.Message), "model"):
			me.Message = withDetail(fmt.Sprintf("model %q was not found at %s (404): check the model name (with Ollama, pull it first: ollama pull %s)", modelName, a.endpoint, modelName), he.Message)
		default:
			me.Message = withDetail(fmt.Sprintf("%s/chat/completions was not found (404) for model %q: check OPENAI_BASE_URL (it usually ends in /v1)", a.endpoint, modelName), he.Message)
		}
	case s == http.StatusTooManyRequests:
		me.Class = model.ClassRateLimited
		if strings.Contains(code, "insufficient_quota") {
			me.Message = withDetail("the API quota is used up (429): check the plan and billing of the OPENAI_API_KEY account", he.Message)
		} else {
			me.Retryable = true
			me.Message = withDetail(fmt.Sprintf("%s is rate limiting requests (429); try again shortly", a.endpoint), he.Message)
		}
	case s == http.StatusRequestTimeout:
		me.Class, me.Retryable = model.ClassTimeout, true
		me.Message = withDetail(fmt.Sprintf("%s timed out handling the request (408)", a.endpoint), he.Message)
	case s == http.StatusServiceUnavailable || s == 529:
		me.Class, me.Retryable = model.ClassOverloaded, true
		me.Message = withDetail(fmt.Sprintf("%s is overloaded or unavailable (%d); try again shortly", a.endpoint, s), he.Message)
	case s >= 500 || s == http.StatusConflict:
		me.Class, me.Retryable = model.ClassProviderError, true
		me.Message = withDetail(fmt.Sprintf("%s had an internal error (%d)", a.endpoint, s), he.Message)
	default: // 400, 413, 422 and the rest of 4xx
		me.Class = model.ClassInvalidRequest
		what := "refused the request"
		if strings.Contains(code, "context_length") {
			what = fmt.Sprintf("says the conversation is too long for model %q", modelName)
		}
		me.Message = withDetail(fmt.Sprintf("%s %s (%d)", a.endpoint, what, s), he.Message)
	}
	switch he.Header.Get("X-Should-Retry") {
	case "true":
		me.Retryable = true
	case "false":
		me.Retryable = false
	}
	if me.Class == model.ClassInvalidRequest && isOverflow(code, he.Message) {
		// The conversation does not fit the window: the agent loop
		// compacts and retries (docs/context.md).
		me.Class, me.Retryable, me.Window = model.ClassContextOverflow, false, model.WindowFromMessage(he.Message)
	}
	return me
}

// isOverflow reports whether an error is a server's refusal of a request
// too long for the model's context window: OpenAI's code
// context_length_exceeded ("This model's maximum context length is N
// tokens. However, your messages resulted in M tokens."), vLLM's
// message of the same words with code 400, llama.cpp's type
// exceed_context_size_error ("the request exceeds the available context
// size"). code is the lower-cased code and type.
func isOverflow(code, msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(code, "context_length") || strings.Contains(code, "exceed_context_size") ||
		strings.Contains(m, "maximum context length") || strings.Contains(m, "exceeds the available context size") ||
		strings.Contains(m, "context window")
}

// fromStreamError classifies an error object sent as a data line
// mid-stream.
func (a *Adapter) fromStreamError(se *ssestream.StreamError) *model.Error {
	typ, code, msg, ok := parseErrorJSON(se.Event.Data)
	if !ok {
		msg = clip(se.Message, 500)
	}
	k := strings.ToLower(typ + " " + code + " " + msg)
	me := &model.Error{Err: se}
	switch {
	case strings.Contains(k, "rate_limit") || strings.Contains(k, "rate limit") || code == "429":
		me.Class, me.Retryable = model.ClassRateLimited, true
	case strings.Contains(k, "overloaded") || strings.Contains(k, "unavailable") || code == "503" || code == "529":
		me.Class, me.Retryable = model.ClassOverloaded, true
	case strings.Contains(k, "authentication") || strings.Contains(k, "permission") || code == "401" || code == "403":
		me.Class = model.ClassAuth
	case strings.Contains(k, "invalid_request") || strings.Contains(k, "bad_request") || strings.Contains(k, "badrequest") ||
		code == "400" || code == "422" || strings.Contains(k, "context_length"):
		me.Class = model.ClassInvalidRequest
	default:
		me.Class, me.Retryable = model.ClassProviderError, true
	}
	me.Message = withDetail(fmt.Sprintf("%s reported an error in the middle of the stream", a.endpoint), msg)
	if isOverflow(strings.ToLower(typ+" "+code), msg) {
		me.Class, me.Retryable, me.Window = model.ClassContextOverflow, false, model.WindowFromMessage(msg)
	}
	return me
}
