package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/metis-agent/metis/internal/model"
)

// retryAfterError is a classified failure that carries the provider's
// Retry-After hint (model.RetryAfter), which RetryPolicy honours.
type retryAfterError struct {
	err   *model.Error
	after time.Duration
}

func (e *retryAfterError) Error() string             { return e.err.Error() }
func (e *retryAfterError) Unwrap() error             { return e.err }
func (e *retryAfterError) RetryAfter() time.Duration { return e.after }

// classify turns a failure of the SDK (other than cancellation and the
// idle timeout, handled by the caller) into a classified error. Only a
// failure before the first delta is retryable.
func (a *Adapter) classify(err error, emitted, responded bool) error {
	var ae *sdk.Error
	if errors.As(err, &ae) {
		return a.apiError(ae, emitted)
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) || strings.HasPrefix(err.Error(), "received error while streaming") {
		return &model.Error{Class: model.ClassProviderError, Retryable: !emitted, Err: err,
			Message: fmt.Sprintf("Anthropic at %s sent a stream event that does not parse; try again", a.baseURL)}
	}
	if responded {
		return &model.Error{Class: model.ClassNetwork, Retryable: !emitted, Err: err,
			Message: fmt.Sprintf("the connection to Anthropic at %s broke mid-stream (%v); try again", a.baseURL, rootCause(err))}
	}
	return &model.Error{Class: model.ClassNetwork, Retryable: !emitted, Err: err,
		Message: fmt.Sprintf("cannot reach Anthropic at %s (%v); check the network and ANTHROPIC_BASE_URL", a.baseURL, rootCause(err))}
}

// rootCause is the innermost error, which names what actually failed
// ("connection refused") without the SDK's request dump.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// apiError classifies an error answer of the API: an HTTP error status, or
// an error event inside a 200 stream (then StatusCode is 200 and the type
// of the event decides).
func (a *Adapter) apiError(ae *sdk.Error, emitted bool) error {
	typ := string(ae.Type())
	status := ae.StatusCode
	midStream := status < 400
	class, retryable := errorClass(typ, status)
	detail := apiDetail(ae)

	var where string
	switch {
	case midStream && typ != "":
		where = typ + " mid-stream"
	case midStream:
		where = "an error mid-stream"
	case typ != "":
		where = fmt.Sprintf("%d %s", status, typ)
	default:
		where = strings.TrimSpace(fmt.Sprintf("%d %s", status, http.StatusText(status)))
	}
	var after time.Duration
	if !midStream && ae.Response != nil {
		after = retryAfter(ae.Response.Header)
	}

	// The message reads: what happened (where): what to do (Anthropic
	// said: its own words) [request-id].
	var msg string
	switch class {
	case model.ClassAuth:
		switch {
		case status == http.StatusUnauthorized:
			msg = "Anthropic rejected the API key (401): check ANTHROPIC_API_KEY"
		case typ == "authentication_error":
			msg = fmt.Sprintf("Anthropic rejected the API key (%s): check ANTHROPIC_API_KEY", where)
		case typ == "billing_error":
			msg = fmt.Sprintf("Anthropic refused the request for billing reasons (%s): check the account's plan and credit balance", where)
		default:
			msg = fmt.Sprintf("Anthropic refused access (%s): the API key may not use this model or feature", where)
		}
	case model.ClassRateLimited:
		msg = fmt.Sprintf("Anthropic rate limited the request (%s)", where)
		if after > 0 {
			msg += fmt.Sprintf(" and asked to retry after %s", fmtDuration(after))
		}
		msg += ": wait, lower the request rate, or use another model"
	case model.ClassOverloaded:
		msg = fmt.Sprintf("Anthropic is overloaded (%s): try again shortly or use another model", where)
	case model.ClassProviderError:
		msg = fmt.Sprintf("Anthropic failed to answer (%s): try again", where)
	default: // invalid_request
		switch {
		case status == http.StatusNotFound || typ == "not_found_error":
			msg = fmt.Sprintf("Anthropic does not know this model or endpoint (%s): check the model id and ANTHROPIC_BASE_URL", where)
		case status == http.StatusRequestEntityTooLarge || typ == "request_too_large":
			msg = fmt.Sprintf("the request is too large for Anthropic (%s): shorten the conversation or its tool results", where)
		default:
			msg = fmt.Sprintf("Anthropic rejected the request (%s)", where)
		}
	}
	if midStream && emitted {
		msg += "; the partial answer was kept"
	}
	if detail != "" {
		msg += " (Anthropic said: " + detail + ")"
	}
	if ae.RequestID != "" {
		msg += " [request-id " + ae.RequestID + "]"
	}
	me := &model.Error{Class: class, Message: msg, Retryable: retryable && !emitted, Err: ae}
	if class == model.ClassInvalidRequest && isOverflow(detail) {
		// The conversation does not fit the window: the agent loop
		// compacts and retries (docs/context.md).
		me.Class, me.Retryable, me.Window = model.ClassContextOverflow, false, model.WindowFromMessage(detail)
		me.Message = "the conversation is too long for the model's context window (Anthropic said: " + detail + ")"
		if ae.RequestID != "" {
			me.Message += " [request-id " + ae.RequestID + "]"
		}
	}
	if after > 0 {
		return &retryAfterError{err: me, after: after}
	}
	return me
}

// isOverflow reports whether an invalid_request_error's message is
// Anthropic's refusal of a request too long for the context window:
// "prompt is too long: 208310 tokens > 200000 maximum", or "input length
// and `max_tokens` exceed context limit: 199759 + 8192 > 200000, ...".
func isOverflow(detail string) bool {
	d := strings.ToLower(detail)
	return strings.Contains(d, "prompt is too long") || strings.Contains(d, "exceed context limit")
}

// errorClass maps an Anthropic error type, else the HTTP status, to a
// class, and says whether a retry may help.
func errorClass(typ string, status int) (class string, retryable bool) {
	switch typ {
	case "overloaded_error":
		return model.ClassOverloaded, true
	case "rate_limit_error":
		return model.ClassRateLimited, true
	case "api_error", "timeout_error":
		return model.ClassProviderError, true
	case "authentication_error", "permission_error", "billing_error":
		return model.ClassAuth, false
	case "invalid_request_error", "not_found_error", "request_too_large":
		return model.ClassInvalidRequest, false
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return model.ClassAuth, false
	case status == http.StatusTooManyRequests:
		return model.ClassRateLimited, true
	case status == 529:
		return model.ClassOverloaded, true
	case status >= 500 || status == http.StatusRequestTimeout || status < 400:
		// An unknown error event mid-stream counts as the provider's.
		return model.ClassProviderError, true
	}
	return model.ClassInvalidRequest, false
}

// apiDetail is the provider's own message ({"error":{"message"}}), or a
// short excerpt of a body that is not Anthropic's JSON (a proxy's page).
func apiDetail(ae *sdk.Error) string {
	raw := ae.RawJSON()
	var env struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &env) == nil && env.Error.Message != "" {
		return env.Error.Message
	}
	raw = strings.Join(strings.Fields(raw), " ")
	if len(raw) > 200 {
		n := 200
		for n > 0 && !utf8.RuneStart(raw[n]) {
			n--
		}
		raw = raw[:n] + "…"
	}
	return raw
}

// retryAfter reads retry-after-ms or retry-after (seconds or an HTTP date).
func retryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
