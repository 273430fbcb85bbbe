package openai

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/metis-agent/metis/internal/model"
)

// runFast is runStream through the adapter's own decoding (chunk).
func runFast(t *testing.T, body []byte) fuzzRun {
	t.Helper()
	var r fuzzRun
	resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body))}
	stream := ssestream.NewStream[chunk](ssestream.NewDecoder(resp), nil)
	defer stream.Close()
	r.tr = newTranslator(context.Background(), func(d model.Delta) error {
		r.deltas = append(r.deltas, d)
		return nil
	}, quietLogger())
	for stream.Next() {
		c := stream.Current()
		if err := r.tr.chunk(&c); err != nil {
			t.Fatalf("chunk: %v", err)
		}
	}
	if stream.Err() == nil && r.tr.sawChunk {
		if err := r.tr.finish(); err != nil {
			t.Fatalf("finish: %v", err)
		}
		r.clean = true
	}
	return r
}

// sameTranslation fails t unless two runs of one stream made the same
// deltas (ids metis made up for id-less tool calls aside), the same
// result and the same ending.
func sameTranslation(t *testing.T, name string, fast, full fuzzRun) {
	t.Helper()
	norm := func(ds []model.Delta) []model.Delta {
		out := make([]model.Delta, len(ds))
		for i, d := range ds {
			if strings.HasPrefix(d.ToolUseID, "call_metis_") {
				d.ToolUseID = "call_metis_*"
			}
			out[i] = d
		}
		return out
	}
	if !reflect.DeepEqual(norm(fast.deltas), norm(full.deltas)) {
		t.Fatalf("%s: the fast decode and the SDK's full decode disagree\nfast %+v\nfull %+v", name, fast.deltas, full.deltas)
	}
	if fr, fu := fast.tr.result(), full.tr.result(); fr != fu || fast.clean != full.clean {
		t.Fatalf("%s: fast result %+v (clean %v), full %+v (clean %v)", name, fr, fast.clean, fu, full.clean)
	}
}

// The adapter's decoding (a chunk's choices and usage, in the SDK's own
// types) gives exactly what the SDK's full ChatCompletionChunk decode
// gives: the same deltas (reasoning, text, refusals, tool calls and
// their argument fragments, block stops), usage and stop reason, on
// every recorded stream.
func TestFastDecodeAgreesWithFullDecode(t *testing.T) {
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
	// Chunks the smaller decode refuses are decoded in full.
	streams["odd types"] = []byte(`data: {"choices":{"index":0},"usage":"many"}` + "\n\n" +
		`data: {"id":5,"choices":[{"index":0,"delta":{"content":"ok"}}],"usage":[1]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"content":"fine"},"finish_reason":"stop"}],"usage":{"prompt_tokens":"3"}}` + "\n\n")
	for name, body := range streams {
		sameTranslation(t, name, runFast(t, body), runStream(t, body))
	}

	r := runFast(t, []byte(long))
	kinds := map[model.DeltaKind]int{}
	for _, d := range r.deltas {
		kinds[d.Kind]++
	}
	for _, k := range []model.DeltaKind{model.KindText, model.KindThinking, model.KindToolUseStart, model.KindToolInput, model.KindBlockStop} {
		if kinds[k] == 0 {
			t.Errorf("the long stream has no delta of kind %v: %v", k, kinds)
		}
	}
	if res := r.tr.result(); res.StopReason != model.StopToolUse || res.Usage.OutputTokens == 0 || res.Usage.CacheReadTokens != 1024 {
		t.Errorf("long stream result %+v", res)
	}
}

// The adapter, over HTTP, streams the long answer exactly as the SDK's
// full decode translates it.
func TestAdapterLongStreamAgreesWithFullDecode(t *testing.T) {
	long, _ := longStream(300, 3000, 200)
	fs := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		startSSE(w)
		io.WriteString(w, long)
	})
	var got []model.Delta
	res, err := fs.adapter(t, nil).Stream(t.Context(), simpleReq(), func(d model.Delta) error {
		got = append(got, d)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := runStream(t, []byte(long))
	sameTranslation(t, "adapter", fuzzRun{deltas: got, tr: &translator{}, clean: true}, fuzzRun{deltas: want.deltas, tr: &translator{}, clean: true})
	if wres := want.tr.result(); res != wres {
		t.Fatalf("result %+v, want %+v", res, wres)
	}
}

// The Adapter holds no sdk.Client, by value or by pointer: the client's
// type reaches every service of the SDK, and a value of it reachable from
// the Adapter (an interface value) links all of them and their methods
// into the binary (94 → 117 MB measured). attempt builds its client as a
// local value.
func TestAdapterHoldsNoSDKClient(t *testing.T) {
	client := reflect.TypeFor[sdk.Client]()
	typ := reflect.TypeFor[Adapter]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type == client || f.Type == reflect.PointerTo(client) {
			t.Errorf("Adapter.%s is an sdk.Client", f.Name)
		}
	}
}
