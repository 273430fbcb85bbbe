package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/model"
)

// cancelStream is a call with text and two tool calls whose arguments
// are split mid-token, without the final [DONE].
func cancelStream() []string {
	chunk := func(delta map[string]any, finish any) string {
		return dataEvent(map[string]any{"id": "chatcmpl-c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}, "usage": nil})
	}
	call := func(i int, id, name, args string) string {
		f := map[string]any{"arguments": args}
		c := map[string]any{"index": i, "function": f}
		if id != "" {
			c["id"], c["type"], f["name"] = id, "function", name
		}
		return chunk(map[string]any{"tool_calls": []any{c}}, nil)
	}
	return []string{
		chunk(map[string]any{"role": "assistant", "content": ""}, nil),
		chunk(map[string]any{"content": "Reading"}, nil),
		chunk(map[string]any{"content": " two files."}, nil),
		call(0, "call_a", "read_file", ""),
		call(0, "", "", `{"pa`), call(0, "", "", `th": "a`), call(0, "", "", `.txt"}`),
		call(1, "call_b", "read_file", `{"path"`), call(1, "", "", `: "b.txt"}`),
		chunk(map[string]any{}, "tool_calls"),
		dataEvent(map[string]any{"id": "chatcmpl-c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
			"choices": []any{}, "usage": map[string]any{"prompt_tokens": 50, "completion_tokens": 30, "total_tokens": 80}}),
	}
}

// checkCancelled asserts a prompt return with context.Canceled.
func checkCancelled(t *testing.T, err error, cancelledAt time.Time) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v; want one wrapping context.Canceled", err)
	}
	if c, _ := model.Classify(err); c != model.ClassCancelled {
		t.Errorf("Classify: %s", c)
	}
	if d := time.Since(cancelledAt); d > 2*time.Second { // well under the 5s idle timeout
		t.Errorf("returned %s after the cancel", d)
	}
}

func TestCancelAtEveryDelta(t *testing.T) {
	evs := cancelStream()
	full, res, _, err := run(t, newServer(t, serveEvents(append(evs, doneEvent)...)).adapter(t, nil), context.Background(), simpleReq())
	if err != nil || res.StopReason != model.StopToolUse {
		t.Fatalf("full run: %v %+v", err, res)
	}
	checkDeltas(t, full, []model.Delta{
		text(0, "Reading"), text(0, " two files."),
		start(1, "call_a", "read_file"), input(1, `{"pa`), input(1, `th": "a`), input(1, `.txt"}`),
		start(2, "call_b", "read_file"), input(2, `{"path"`), input(2, `: "b.txt"}`),
		stop(0), stop(1), stop(2),
	})
	// k deltas, then cancel: mid-text, mid-tool-arguments, ..., after the
	// last delta (the stream still open, its usage chunk unread or [DONE]
	// not yet sent).
	for k := 1; k <= len(full); k++ {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			h := newHolder()
			fs := newServer(t, h.handler(evs...))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got []model.Delta
			var cancelledAt time.Time
			_, err := fs.adapter(t, nil).Stream(ctx, simpleReq(), func(d model.Delta) error {
				got = append(got, d)
				if len(got) == k {
					cancelledAt = time.Now()
					cancel()
				}
				return nil
			})
			checkCancelled(t, err, cancelledAt)
			checkDeltas(t, got, full[:k])
			h.waitGone(t)
			if fs.requests() != 1 {
				t.Errorf("%d requests", fs.requests())
			}
		})
	}
}

func TestCancelBeforeFirstDelta(t *testing.T) {
	for name, evs := range map[string][]string{
		"before headers": nil,
		"after headers":  {},
		"after role":     cancelStream()[:1],
	} {
		t.Run(name, func(t *testing.T) {
			h := newHolder()
			handler := h.handler(evs...)
			if evs == nil {
				handler = func(w http.ResponseWriter, r *http.Request) {
					close(h.reached)
					<-r.Context().Done()
					close(h.gone)
				}
			}
			fs := newServer(t, handler)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var cancelledAt time.Time
			go func() {
				<-h.reached
				time.Sleep(10 * time.Millisecond) // let the client read what was sent
				cancelledAt = time.Now()
				cancel()
			}()
			got, _, _, err := run(t, fs.adapter(t, nil), ctx, simpleReq())
			checkCancelled(t, err, cancelledAt)
			if len(got) != 0 {
				t.Errorf("deltas %v", got)
			}
			h.waitGone(t)
			if fs.requests() != 1 {
				t.Errorf("%d requests", fs.requests())
			}
		})
	}
}

func TestCancelDuringRetryWait(t *testing.T) {
	seen := make(chan struct{}, 1)
	fs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		serveStatus(http.StatusServiceUnavailable, map[string]string{"Retry-After": "5"}, `{"error":{"message":"busy","type":"server_error"}}`)(w, r)
		seen <- struct{}{}
	})
	a := fs.adapter(t, func(o *Options) { o.Retry.Max = 5 * time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelledAt time.Time
	go func() {
		<-seen
		time.Sleep(20 * time.Millisecond)
		cancelledAt = time.Now()
		cancel()
	}()
	_, _, _, err := run(t, a, ctx, simpleReq())
	checkCancelled(t, err, cancelledAt)
	if fs.requests() != 1 {
		t.Errorf("%d requests", fs.requests())
	}
}

func TestAlreadyCancelled(t *testing.T) {
	fs := newServer(t, replay(t, "text.sse"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, _, _, err := run(t, fs.adapter(t, nil), ctx, simpleReq())
	checkCancelled(t, err, time.Now())
	if len(got) != 0 {
		t.Errorf("deltas %v", got)
	}
}
