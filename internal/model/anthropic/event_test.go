package anthropic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/metis-agent/metis/internal/model"
)

// union is the event decoded into the SDK's full union, as the SDK's
// Messages.NewStreaming decodes every event.
func (e *event) union(t testing.TB) sdk.MessageStreamEventUnion {
	t.Helper()
	if !e.isDelta {
		return *e.full
	}
	var u sdk.MessageStreamEventUnion
	if err := json.Unmarshal([]byte(e.delta.RawJSON()), &u); err != nil {
		t.Fatalf("the SDK cannot decode %q: %v", e.delta.RawJSON(), err)
	}
	return u
}

// translation is what a translator made of one stream.
type translation struct {
	deltas []model.Delta
	res    model.Result
	err    string // the handle or stream error, "" for none
}

// translateFull translates body the way the adapter did before its fast
// path: every event decoded by the SDK's stream into the full union and
// read through AsAny.
func translateFull(t testing.TB, body []byte) translation {
	t.Helper()
	return translate(body, func(tr *translator, u sdk.MessageStreamEventUnion) error { return tr.handleFull(u) })
}

// translateFast translates body through the adapter's own decoding.
func translateFast(t testing.TB, body []byte) translation {
	t.Helper()
	return translate(body, func(tr *translator, ev event) error { return tr.handle(&ev) })
}

// translate runs body through a translator, each event decoded by the
// SDK's stream as a T and handed to it by handle.
func translate[T any](body []byte, handle func(*translator, T) error) translation {
	stream := ssestream.NewStream[T](ssestream.NewDecoder(sseResponse(body)), nil)
	defer stream.Close()
	var out translation
	tr := &translator{DeltaSink: model.DeltaSink{Ctx: context.Background(), Emit: func(d model.Delta) error {
		out.deltas = append(out.deltas, d)
		return nil
	}}, log: quiet}
	var err error
	for !tr.done && stream.Next() {
		if err = handle(tr, stream.Current()); err != nil {
			break
		}
	}
	if err == nil {
		err = stream.Err()
	}
	if err != nil {
		out.err = err.Error()
	}
	out.res = model.Result{Usage: tr.usage, StopReason: tr.stopReason()}
	return out
}

// recordedStreams are the recorded streams of testdata, the fuzz seeds
// and a long generated answer (thinking, text, tool input), by name.
func recordedStreams(t testing.TB) map[string][]byte {
	t.Helper()
	streams := map[string][]byte{}
	names, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil || len(names) == 0 {
		t.Fatalf("recorded streams: %v %v", names, err)
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		streams[filepath.Base(name)] = b
	}
	for i, s := range streamSeeds {
		streams["seed "+string(rune('a'+i))] = []byte(s)
	}
	long, _ := longStream(300, 3000, 200)
	streams["long"] = []byte(long)
	return streams
}

// The adapter's decoding (a content_block_delta decoded once, into the
// SDK's ContentBlockDeltaEvent) gives exactly what the SDK's full decode
// (the union, then AsAny) gives: the same deltas (text, thinking,
// signatures, tool use and its input fragments, block stops), usage,
// stop reason and errors, on every recorded stream.
func TestFastDecodeAgreesWithFullDecode(t *testing.T) {
	for name, body := range recordedStreams(t) {
		full, fast := translateFull(t, body), translateFast(t, body)
		if !reflect.DeepEqual(fast, full) {
			t.Errorf("%s: the fast decode and the SDK's full decode disagree\nfast %+v\nfull %+v", name, fast, full)
		}
	}
	// The long stream exercises every kind of delta.
	long := translateFull(t, recordedStreams(t)["long"])
	kinds := map[model.DeltaKind]int{}
	signatures := 0
	for _, d := range long.deltas {
		kinds[d.Kind]++
		if d.Kind == model.KindThinking && d.Signature != "" {
			signatures++
		}
	}
	for _, k := range []model.DeltaKind{model.KindText, model.KindThinking, model.KindToolUseStart, model.KindToolInput, model.KindBlockStop} {
		if kinds[k] == 0 {
			t.Errorf("the long stream has no delta of kind %v: %v", k, kinds)
		}
	}
	if signatures == 0 {
		t.Error("the long stream has no signature")
	}
	if long.res.StopReason != model.StopToolUse || long.res.Usage.OutputTokens == 0 || long.res.Usage.CacheReadTokens == 0 {
		t.Errorf("long stream result %+v", long.res)
	}
}

// The adapter, over HTTP, streams the long answer exactly as the SDK's
// full decode translates it.
func TestAdapterLongStreamAgreesWithFullDecode(t *testing.T) {
	long, _ := longStream(300, 3000, 200)
	f := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sseHeaders(w)
		io.WriteString(w, long)
	})
	o := run(t.Context(), newAdapter(t, f, nil), simpleRequest(), nil)
	if o.err != nil {
		t.Fatal(o.err)
	}
	want := translateFull(t, []byte(long))
	if !reflect.DeepEqual(o.deltas, want.deltas) {
		t.Fatalf("the adapter's %d deltas differ from the full decode's %d", len(o.deltas), len(want.deltas))
	}
	if o.res != want.res {
		t.Fatalf("result %+v, want %+v", o.res, want.res)
	}
	if o.accErr != nil {
		t.Fatal(o.accErr)
	}
}
