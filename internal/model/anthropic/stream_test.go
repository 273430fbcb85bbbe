package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

func TestTextOnly(t *testing.T) {
	f := newFake(t, serveSSE(loadSSE(t, "text.sse")))
	a := newAdapter(t, f, nil)
	o := run(t.Context(), a, simpleRequest(), nil)
	if o.err != nil {
		t.Fatal(o.err)
	}
	want := []model.Delta{
		{Kind: model.KindText, Index: 0, Text: "Hello"},
		{Kind: model.KindText, Index: 0, Text: ", wörld — ✓"},
		{Kind: model.KindText, Index: 0, Text: "!\nBye."},
		{Kind: model.KindBlockStop, Index: 0},
	}
	if !reflect.DeepEqual(o.deltas, want) {
		t.Fatalf("deltas\n got %+v\nwant %+v", o.deltas, want)
	}
	wantRes := model.Result{StopReason: model.StopEndTurn,
		Usage: message.Usage{InputTokens: 25, OutputTokens: 15, CacheReadTokens: 11, CacheCreationTokens: 7}}
	if o.res != wantRes {
		t.Fatalf("result %+v, want %+v", o.res, wantRes)
	}
	if o.accErr != nil {
		t.Fatal(o.accErr)
	}
	if c := o.acc.Content(); len(c) != 1 || c[0].Text != "Hello, wörld — ✓!\nBye." {
		t.Fatalf("content %+v", c)
	}
	if n := f.requests(); n != 1 {
		t.Fatalf("%d requests", n)
	}
	f.mu.Lock()
	h := f.headers[0]
	f.mu.Unlock()
	if h.Get("X-Api-Key") != "sk-ant-test" || h.Get("Anthropic-Version") == "" {
		t.Fatalf("headers: x-api-key %q, anthropic-version %q", h.Get("X-Api-Key"), h.Get("Anthropic-Version"))
	}
}

func TestThinkingSignature(t *testing.T) {
	f := newFake(t, serveSSE(loadSSE(t, "thinking.sse")))
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), nil)
	if o.err != nil {
		t.Fatal(o.err)
	}
	const sig = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
	want := []model.Delta{
		{Kind: model.KindThinking, Index: 0, Text: "Let me solve this step by step:\n\n1. First break down 27 * 453"},
		{Kind: model.KindThinking, Index: 0, Text: "\n2. 453 = 400 + 50 + 3"},
		{Kind: model.KindThinking, Index: 0, Signature: sig},
		{Kind: model.KindBlockStop, Index: 0},
		{Kind: model.KindText, Index: 1, Text: "27 * 453 = 12,231"},
		{Kind: model.KindBlockStop, Index: 1},
	}
	if !reflect.DeepEqual(o.deltas, want) {
		t.Fatalf("deltas\n got %+v\nwant %+v", o.deltas, want)
	}
	c := o.acc.Content()
	if len(c) != 2 || c[0].Type != message.BlockThinking || c[0].Signature != sig ||
		c[0].Thinking != "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3" {
		t.Fatalf("content %+v", c)
	}
	if o.res.StopReason != model.StopEndTurn || o.res.Usage.InputTokens != 40 || o.res.Usage.OutputTokens != 120 {
		t.Fatalf("result %+v", o.res)
	}
}

func TestParallelToolUseSplitMidToken(t *testing.T) {
	f := newFake(t, serveSSE(loadSSE(t, "tools.sse")))
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), nil)
	if o.err != nil {
		t.Fatal(o.err)
	}
	want := []model.Delta{
		{Kind: model.KindText, Index: 0, Text: "Let me read both files."},
		{Kind: model.KindBlockStop, Index: 0},
		{Kind: model.KindToolUseStart, Index: 1, ToolUseID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", ToolName: "read_file"},
		{Kind: model.KindToolInput, Index: 1, Text: `{"pa`},
		{Kind: model.KindToolInput, Index: 1, Text: `th": "a`},
		{Kind: model.KindToolInput, Index: 1, Text: `.go"}`},
		{Kind: model.KindBlockStop, Index: 1},
		{Kind: model.KindToolUseStart, Index: 2, ToolUseID: "toolu_01Ab9XyZq4R2vLmNpQ8sTuVw", ToolName: "read_file"},
		{Kind: model.KindToolInput, Index: 2, Text: `{"path": "dir/b`},
		{Kind: model.KindToolInput, Index: 2, Text: ` ü.go", "lim`},
		{Kind: model.KindToolInput, Index: 2, Text: `it": 20}`},
		{Kind: model.KindBlockStop, Index: 2},
	}
	if !reflect.DeepEqual(o.deltas, want) {
		t.Fatalf("deltas\n got %+v\nwant %+v", o.deltas, want)
	}
	if o.accErr != nil {
		t.Fatal(o.accErr)
	}
	uses := o.acc.ToolUses()
	if len(uses) != 2 || !jsonEqual(t, string(uses[0].Input), `{"path":"a.go"}`) ||
		!jsonEqual(t, string(uses[1].Input), `{"path":"dir/b ü.go","limit":20}`) {
		t.Fatalf("tool uses %+v", uses)
	}
	for _, u := range uses {
		if err := o.acc.InputError(u.ID); err != nil {
			t.Fatalf("%s: %v", u.ID, err)
		}
	}
	if o.res.StopReason != model.StopToolUse || o.res.Usage.InputTokens != 472 || o.res.Usage.OutputTokens != 89 {
		t.Fatalf("result %+v", o.res)
	}
}

func TestToolInputInBlockStart(t *testing.T) {
	f := newFake(t, serveSSE(loadSSE(t, "tool_start_input.sse")))
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), nil)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if len(o.deltas) != 3 || o.deltas[0].Kind != model.KindToolUseStart || o.deltas[1].Kind != model.KindToolInput ||
		o.deltas[2].Kind != model.KindBlockStop {
		t.Fatalf("deltas %+v", o.deltas)
	}
	const input = `{"path":"src/ä","depth":2,"flags":["a","b"]}`
	if !jsonEqual(t, o.deltas[1].Text, input) {
		t.Fatalf("input fragment %q", o.deltas[1].Text)
	}
	uses := o.acc.ToolUses()
	if len(uses) != 1 || uses[0].Name != "list_dir" || !jsonEqual(t, string(uses[0].Input), input) || o.acc.InputError(uses[0].ID) != nil {
		t.Fatalf("tool uses %+v", uses)
	}
}

// A start that carries an input and is followed by input_json_delta
// fragments: the fragments are the input, the start's is dropped, so the
// deltas never reassemble to "{}" followed by more JSON.
func TestToolInputStartThenDeltas(t *testing.T) {
	script := sseEvent("message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","usage":{"input_tokens":1,"output_tokens":1}}}`) +
		sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"shell","input":{"command":"l"}}}`) +
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":"}}`) +
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" \"ls\"}"}}`) +
		sseEvent("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		sseEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}`) +
		sseEvent("message_stop", `{"type":"message_stop"}`)
	f := newFake(t, serveSSE(script))
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), nil)
	if o.err != nil {
		t.Fatal(o.err)
	}
	var raw strings.Builder
	for _, d := range o.deltas {
		if d.Kind == model.KindToolInput {
			raw.WriteString(d.Text)
		}
	}
	if raw.String() != `{"command": "ls"}` {
		t.Fatalf("fragments reassemble to %q", raw.String())
	}
	if u := o.acc.ToolUses(); len(u) != 1 || !jsonEqual(t, string(u[0].Input), `{"command":"ls"}`) {
		t.Fatalf("tool uses %+v", u)
	}
}

func TestOverloadedMidStreamNotRetried(t *testing.T) {
	f := newFake(t, serveSSE(loadSSE(t, "overloaded.sse")))
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), nil)
	if o.err == nil {
		t.Fatal("no error")
	}
	class, retryable := classOf(o.err)
	if class != model.ClassOverloaded || retryable {
		t.Fatalf("class %s retryable %v: %v", class, retryable, o.err)
	}
	if _, msg := model.Classify(o.err); !strings.Contains(msg, "overloaded") || !strings.Contains(msg, "Overloaded") {
		t.Fatalf("message %q", msg)
	}
	if n := f.requests(); n != 1 {
		t.Fatalf("%d requests, want 1 (no retry after a delta)", n)
	}
	want := []model.Delta{{Kind: model.KindText, Text: "Once upon"}, {Kind: model.KindText, Text: " a time"}}
	if !reflect.DeepEqual(o.deltas, want) {
		t.Fatalf("deltas %+v", o.deltas)
	}
	if o.res.Usage.InputTokens != 25 {
		t.Fatalf("partial usage %+v", o.res.Usage)
	}
}

// An error event before any delta is retried like a 529.
func TestOverloadedBeforeFirstDeltaRetried(t *testing.T) {
	evs := sseEvents(loadSSE(t, "overloaded.sse"))
	text := loadSSE(t, "text.sse")
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		if n == 1 {
			writeEvents(w, []string{evs[0], evs[len(evs)-1]}) // message_start, error
			return
		}
		writeEvents(w, sseEvents(text))
	})
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), nil)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if n := f.requests(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	if len(o.deltas) != 4 || o.res.StopReason != model.StopEndTurn {
		t.Fatalf("deltas %+v result %+v", o.deltas, o.res)
	}
}

func TestRateLimitedRetriedAfterRetryAfter(t *testing.T) {
	text := loadSSE(t, "text.sse")
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			apiErrorAnswer(w, http.StatusTooManyRequests, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
				map[string]string{"retry-after": "1"})
			return
		}
		sseHeaders(w)
		writeEvents(w, sseEvents(text))
	})
	a := newAdapter(t, f, func(o *Options) {
		o.Retry = model.RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 5 * time.Second}
	})
	o := run(t.Context(), a, simpleRequest(), nil)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if n := f.requests(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	if o.elapsed < 950*time.Millisecond {
		t.Fatalf("retried after %v: retry-after 1s not honoured", o.elapsed)
	}
	ref := run(t.Context(), newAdapter(t, newFake(t, serveSSE(text)), nil), simpleRequest(), nil)
	if !reflect.DeepEqual(o.deltas, ref.deltas) {
		t.Fatalf("deltas after a retry\n got %+v\nwant %+v", o.deltas, ref.deltas)
	}
	// The retried request is the same request.
	if !reflect.DeepEqual(f.body(0), f.body(1)) {
		t.Fatalf("retry sent a different body")
	}
}

func TestRateLimitedExhausted(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		apiErrorAnswer(w, http.StatusTooManyRequests, "rate_limit_error", "slow down", map[string]string{"retry-after": "3"})
	})
	a := newAdapter(t, f, func(o *Options) { o.Retry = model.RetryPolicy{Attempts: 1} })
	o := run(t.Context(), a, simpleRequest(), nil)
	class, retryable := classOf(o.err)
	if class != model.ClassRateLimited || !retryable {
		t.Fatalf("class %s retryable %v: %v", class, retryable, o.err)
	}
	var ra model.RetryAfter
	if !errors.As(o.err, &ra) || ra.RetryAfter() != 3*time.Second {
		t.Fatalf("no 3s retry-after hint on %v", o.err)
	}
	if _, msg := model.Classify(o.err); !strings.Contains(msg, "retry after 3s") || !strings.Contains(msg, "slow down") {
		t.Fatalf("message %q", msg)
	}
}

func TestUnauthorizedNotRetried(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		apiErrorAnswer(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key", nil)
	})
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), nil)
	class, retryable := classOf(o.err)
	if class != model.ClassAuth || retryable {
		t.Fatalf("class %s retryable %v: %v", class, retryable, o.err)
	}
	_, msg := model.Classify(o.err)
	if !strings.HasPrefix(msg, "Anthropic rejected the API key (401): check ANTHROPIC_API_KEY") || !strings.Contains(msg, "req_err_1") {
		t.Fatalf("message %q", msg)
	}
	if n := f.requests(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	if len(o.deltas) != 0 {
		t.Fatalf("deltas %+v", o.deltas)
	}
}

func TestHTTPErrorClasses(t *testing.T) {
	cases := []struct {
		status    int
		typ       string
		class     string
		retryable bool
		msg       string
	}{
		{400, "invalid_request_error", model.ClassInvalidRequest, false, "rejected the request"},
		{403, "permission_error", model.ClassAuth, false, "refused access"},
		{404, "not_found_error", model.ClassInvalidRequest, false, "check the model id"},
		{413, "request_too_large", model.ClassInvalidRequest, false, "too large"},
		{422, "", model.ClassInvalidRequest, false, "rejected the request"},
		{500, "api_error", model.ClassProviderError, true, "failed to answer"},
		{502, "", model.ClassProviderError, true, "failed to answer"},
		{529, "overloaded_error", model.ClassOverloaded, true, "overloaded"},
	}
	for _, c := range cases {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if c.typ == "" {
					w.WriteHeader(c.status)
					w.Write([]byte("<html>bad gateway</html>"))
					return
				}
				apiErrorAnswer(w, c.status, c.typ, "detail "+c.typ, nil)
			})
			a := newAdapter(t, f, func(o *Options) { o.Retry.Attempts = 2 })
			o := run(t.Context(), a, simpleRequest(), nil)
			class, retryable := classOf(o.err)
			if class != c.class || retryable != c.retryable {
				t.Fatalf("class %s retryable %v, want %s %v: %v", class, retryable, c.class, c.retryable, o.err)
			}
			if _, msg := model.Classify(o.err); !strings.Contains(msg, c.msg) {
				t.Fatalf("message %q lacks %q", msg, c.msg)
			}
			want := 1
			if c.retryable {
				want = 2
			}
			if n := f.requests(); n != want {
				t.Fatalf("%d requests, want %d", n, want)
			}
		})
	}
}

func TestNetworkErrorNamesBaseURL(t *testing.T) {
	f := newFake(t, serveSSE(""))
	url := f.srv.URL
	f.srv.Close()
	a := newAdapter(t, f, func(o *Options) { o.Retry.Attempts = 2; o.HTTPClient = nil }) // the adapter's own client
	o := run(t.Context(), a, simpleRequest(), nil)
	class, retryable := classOf(o.err)
	if class != model.ClassNetwork || !retryable {
		t.Fatalf("class %s retryable %v: %v", class, retryable, o.err)
	}
	if _, msg := model.Classify(o.err); !strings.Contains(msg, url) {
		t.Fatalf("message %q lacks the base URL %s", msg, url)
	}
}

func TestStreamEndsWithoutMessageStop(t *testing.T) {
	evs := sseEvents(loadSSE(t, "text.sse"))
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		writeEvents(w, evs[:5]) // through the second text delta, then EOF
	})
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), nil)
	class, retryable := classOf(o.err)
	if class != model.ClassNetwork || retryable {
		t.Fatalf("class %s retryable %v: %v", class, retryable, o.err)
	}
	if n := f.requests(); n != 1 || len(o.deltas) != 2 {
		t.Fatalf("%d requests, deltas %+v", n, o.deltas)
	}
}

func TestIdleStreamTimesOut(t *testing.T) {
	evs := sseEvents(loadSSE(t, "text.sse"))
	var f *fake
	f = newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		writeEvents(w, evs[:1]) // message_start, then silence
		f.hang(n, r)
	})
	a := newAdapter(t, f, func(o *Options) { o.IdleTimeout = 200 * time.Millisecond })
	o := run(t.Context(), a, simpleRequest(), nil)
	class, retryable := classOf(o.err)
	if class != model.ClassTimeout || retryable {
		t.Fatalf("class %s retryable %v: %v", class, retryable, o.err)
	}
	if errors.Is(o.err, context.Canceled) {
		t.Fatalf("an idle timeout looks like a cancellation: %v", o.err)
	}
	if _, msg := model.Classify(o.err); !strings.Contains(msg, "the provider sent nothing for 200ms") {
		t.Fatalf("message %q", msg)
	}
	if o.elapsed < 200*time.Millisecond || o.elapsed > 1500*time.Millisecond {
		t.Fatalf("timed out after %v", o.elapsed)
	}
	f.sawDisconnect(t, 1)
	if n := f.requests(); n != 1 {
		t.Fatalf("%d requests", n)
	}
}

func TestIdleBeforeHeadersTimesOut(t *testing.T) {
	var f *fake
	f = newFake(t, func(n int, w http.ResponseWriter, r *http.Request) { f.hang(n, r) })
	a := newAdapter(t, f, func(o *Options) { o.IdleTimeout = 200 * time.Millisecond })
	o := run(t.Context(), a, simpleRequest(), nil)
	if class, _ := classOf(o.err); class != model.ClassTimeout {
		t.Fatalf("class %s: %v", class, o.err)
	}
	if o.elapsed > 1500*time.Millisecond {
		t.Fatalf("timed out after %v", o.elapsed)
	}
	f.sawDisconnect(t, 1)
}

// Pings are bytes: a stream that only pings for longer than the idle
// timeout is alive.
func TestPingsKeepStreamAlive(t *testing.T) {
	evs := sseEvents(loadSSE(t, "text.sse"))
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		writeEvents(w, evs[:1])
		for range 15 { // 600ms of pings only, twice the idle timeout
			time.Sleep(40 * time.Millisecond)
			writeEvents(w, []string{"event: ping\ndata: {\"type\": \"ping\"}\n\n"})
		}
		writeEvents(w, evs[1:])
	})
	a := newAdapter(t, f, func(o *Options) { o.IdleTimeout = 300 * time.Millisecond })
	o := run(t.Context(), a, simpleRequest(), nil)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if len(o.deltas) != 4 {
		t.Fatalf("deltas %+v", o.deltas)
	}
}

// cancelScript is the stream the cancellation tests cut: text, then a
// tool_use whose input arrives in two fragments.
func cancelScript() []string {
	return []string{
		sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_c","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-6","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}`),
		sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`),
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`),
		sseEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
		sseEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_c","name":"read_file","input":{}}}`),
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"pa"}}`),
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"th\": \"a.go\"}"}}`),
		sseEvent("content_block_stop", `{"type":"content_block_stop","index":1}`),
		sseEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":12}}`),
		sseEvent("message_stop", `{"type":"message_stop"}`),
	}
}

func TestCancellation(t *testing.T) {
	script := cancelScript()
	full := run(t.Context(), newAdapter(t, newFake(t, serveSSE(strings.Join(script, ""))), nil), simpleRequest(), nil)
	if full.err != nil || len(full.deltas) != 7 {
		t.Fatalf("uncut run: %v %+v", full.err, full.deltas)
	}
	cases := []struct {
		name   string
		events int // events the server sends before it hangs
		after  int // deltas seen before the cancel (0: cancel once the server hangs)
	}{
		{"before first delta", 1, 0},
		{"mid text", 3, 1},
		{"mid tool input", 7, 5},
		{"after last delta", 10, 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hanging := make(chan struct{})
			var f *fake
			f = newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				writeEvents(w, script[:c.events])
				close(hanging)
				f.hang(n, r)
			})
			a := newAdapter(t, f, nil)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var cancelled time.Time
			if c.after == 0 {
				go func() {
					<-hanging
					time.Sleep(20 * time.Millisecond) // let message_start reach the adapter
					cancelled = time.Now()
					cancel()
				}()
			}
			o := run(ctx, a, simpleRequest(), func(n int, d model.Delta) error {
				if n == c.after {
					cancelled = time.Now()
					cancel()
				}
				return nil
			})
			returned := time.Now()
			if !errors.Is(o.err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", o.err)
			}
			if class, _ := model.Classify(o.err); class != model.ClassCancelled {
				t.Fatalf("class %s", class)
			}
			if d := returned.Sub(cancelled); d > 1500*time.Millisecond { // under the 3s idle timeout
				t.Fatalf("Stream returned %v after the cancel", d)
			}
			if len(o.deltas) != c.after || !slices.Equal(o.deltas, full.deltas[:len(o.deltas)]) {
				t.Fatalf("deltas %+v are not the first %d of %+v", o.deltas, c.after, full.deltas)
			}
			f.sawDisconnect(t, 1)
			if n := f.requests(); n != 1 {
				t.Fatalf("%d requests", n)
			}
		})
	}
}

func TestMidStreamErrorTypes(t *testing.T) {
	evs := sseEvents(loadSSE(t, "overloaded.sse"))
	for typ, class := range map[string]string{
		"api_error": model.ClassProviderError, "rate_limit_error": model.ClassRateLimited,
		"invalid_request_error": model.ClassInvalidRequest, "permission_error": model.ClassAuth,
		"brand_new_error": model.ClassProviderError,
	} {
		t.Run(typ, func(t *testing.T) {
			f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				writeEvents(w, evs[:3]) // one text delta
				writeEvents(w, []string{sseEvent("error", `{"type":"error","error":{"type":"`+typ+`","message":"detail of `+typ+`"}}`)})
			})
			o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), nil)
			got, retryable := classOf(o.err)
			if got != class || retryable {
				t.Fatalf("class %s retryable %v, want %s: %v", got, retryable, class, o.err)
			}
			if _, msg := model.Classify(o.err); !strings.Contains(msg, "detail of "+typ) || !strings.Contains(msg, "req_test_1") {
				t.Fatalf("message %q", msg)
			}
			if n := f.requests(); n != 1 {
				t.Fatalf("%d requests", n)
			}
		})
	}
}

func TestAlreadyCancelled(t *testing.T) {
	f := newFake(t, serveSSE(loadSSE(t, "text.sse")))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	o := run(ctx, newAdapter(t, f, nil), simpleRequest(), nil)
	if !errors.Is(o.err, context.Canceled) || len(o.deltas) != 0 {
		t.Fatalf("%v %+v", o.err, o.deltas)
	}
}

// Cancelling during a retry's backoff returns the cancellation promptly.
func TestCancelDuringRetryWait(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		apiErrorAnswer(w, 529, "overloaded_error", "Overloaded", map[string]string{"retry-after": "5"})
	})
	a := newAdapter(t, f, func(o *Options) {
		o.Retry = model.RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 10 * time.Second}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	ctx, cancel2 := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel2)
	o := run(ctx, a, simpleRequest(), nil)
	if !errors.Is(o.err, context.Canceled) || o.elapsed > 3*time.Second { // the retry-after is 5s
		t.Fatalf("after %v: %v", o.elapsed, o.err)
	}
	if n := f.requests(); n != 1 {
		t.Fatalf("%d requests", n)
	}
}

func TestEmitErrorStops(t *testing.T) {
	var f *fake
	script := cancelScript()
	f = newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		writeEvents(w, script[:4])
		f.hang(n, r)
	})
	boom := errors.New("client gone")
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), func(n int, d model.Delta) error {
		if n == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(o.err, boom) {
		t.Fatalf("error %v, want the emit error", o.err)
	}
	if len(o.deltas) != 2 {
		t.Fatalf("deltas %+v", o.deltas)
	}
	f.sawDisconnect(t, 1)
	if n := f.requests(); n != 1 {
		t.Fatalf("%d requests", n)
	}
}

// A failing emit on the very first delta is not a reason to retry.
func TestEmitErrorOnFirstDeltaNotRetried(t *testing.T) {
	f := newFake(t, serveSSE(loadSSE(t, "text.sse")))
	rejected := &model.Error{Class: model.ClassProviderError, Message: "inconsistent", Retryable: true}
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), func(int, model.Delta) error { return rejected })
	if !errors.Is(o.err, rejected) {
		t.Fatalf("error %v", o.err)
	}
	if n := f.requests(); n != 1 {
		t.Fatalf("%d requests", n)
	}
}

func TestStopReasons(t *testing.T) {
	for raw, want := range map[string]string{
		"end_turn": model.StopEndTurn, "max_tokens": model.StopMaxTokens, "stop_sequence": model.StopSequence,
		"tool_use": model.StopToolUse, "pause_turn": model.StopEndTurn, "refusal": model.StopEndTurn,
		"model_context_window_exceeded": model.StopMaxTokens, "": model.StopEndTurn, "something_new": model.StopEndTurn,
	} {
		tr := &translator{log: quiet, rawStop: raw}
		if got := tr.stopReason(); got != want {
			t.Errorf("%q → %q, want %q", raw, got, want)
		}
	}
}

func TestNewRequiresKey(t *testing.T) {
	_, err := New(Options{})
	if class, msg := model.Classify(err); class != model.ClassUnavailable || !strings.Contains(msg, "ANTHROPIC_API_KEY") {
		t.Fatalf("%s %q", class, msg)
	}
	_, err = New(Options{APIKey: "k", BaseURL: "localhost:8080"})
	if class, msg := model.Classify(err); class != model.ClassUnavailable || !strings.Contains(msg, "ANTHROPIC_BASE_URL") {
		t.Fatalf("%s %q", class, msg)
	}
}

// sseEvent formats one event in Anthropic's wire format.
func sseEvent(name, data string) string {
	if !json.Valid([]byte(data)) {
		panic("invalid event data: " + data)
	}
	return "event: " + name + "\ndata: " + data + "\n\n"
}
