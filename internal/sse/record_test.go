package sse

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unsafe"

	gosse "github.com/tmaxmax/go-sse"

	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// recorded is one SSE client's transport over a recorded response.
type recorded struct {
	t   *transport
	rec *httptest.ResponseRecorder
}

func newRecorded(t *testing.T) *recorded {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/sessions/s/events", nil)
	sess, err := gosse.Upgrade(rec, req)
	if err != nil {
		t.Fatal(err)
	}
	tr := &transport{sess: sess, w: rec, rc: http.NewResponseController(rec), retry: DefaultRetry}
	t.Cleanup(tr.finish)
	return &recorded{t: tr, rec: rec}
}

// goSSE is go-sse's framing of a frame with its cursor: what the
// transport wrote for every frame before events shared their encoding.
func goSSE(t *testing.T, cursor string, frame []byte) string {
	t.Helper()
	b, err := message(cursor, frame).MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRecordShared: two SSE clients writing the same event write the
// same bytes, go-sse's framing of the event (an id line, a data line, a
// blank line), and the part of the record that is the event's own is
// built once, kept in the item, and shared: both clients write the very
// same bytes of it.
func TestRecordShared(t *testing.T) {
	frame := protocol.EventFrame([]byte(`{"id":"01JX0000000000000000000001","type":"text.delta","payload":{"text":"héllo \u2028 world"}}`))
	it := &hub.Item{ID: "01JX0000000000000000000001", Frame: frame}
	a, b := newRecorded(t), newRecorded(t)
	for _, c := range []*recorded{a, b} {
		if err := c.t.WriteItem(it); err != nil {
			t.Fatal(err)
		}
		if err := c.t.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	want := "retry: 2000\n\n" + goSSE(t, it.ID, frame)
	for name, c := range map[string]*recorded{"first": a, "second": b} {
		if got := c.rec.Body.String(); got != want {
			t.Errorf("%s client wrote\n%q\nwant go-sse's framing\n%q", name, got, want)
		}
	}
	head := it.Encoded(recordHead)
	if string(head) != "id: "+it.ID+"\ndata: " {
		t.Fatalf("shared head %q", head)
	}
	if again := it.Encoded(recordHead); unsafe.SliceData(again) != unsafe.SliceData(head) {
		t.Fatal("the head was built again: not shared")
	}
}

// TestRecordMatchesGoSSE: whatever the id and frame, what WriteItem
// writes is go-sse's framing of them; frames that span lines (which
// encoding/json never produces) or ids go-sse refuses are framed by
// go-sse itself.
func TestRecordMatchesGoSSE(t *testing.T) {
	cases := []struct{ id, frame string }{
		{"01JX0000000000000000000001", `{"type":"event"}`},
		{"01JX0000000000000000000002", "{\"a\":\n1}"},
		{"01JX0000000000000000000003", "{\"a\":\r\n1}\r"},
		{"01JX0000000000000000000004", "x\ry"},
		{"bad\nid", `{"type":"event"}`},
		{"", `{"type":"event"}`},
		{"01JX0000000000000000000005", ""},
		{"01JX0000000000000000000006", strings.Repeat("x", 3*writeBufferSize)},
	}
	for _, tc := range cases {
		c := newRecorded(t)
		it := &hub.Item{ID: tc.id, Frame: []byte(tc.frame)}
		if err := c.t.WriteItem(it); err != nil {
			t.Fatal(err)
		}
		if err := c.t.Flush(); err != nil {
			t.Fatal(err)
		}
		want := "retry: 2000\n\n" + goSSE(t, tc.id, []byte(tc.frame))
		if got := c.rec.Body.String(); got != want {
			t.Errorf("id %q frame %.40q: wrote\n%.200q\nwant\n%.200q", tc.id, tc.frame, got, want)
		}
	}
}

// TestBufferGivenBack: a flushed client holds no write buffer, and the
// bytes written around a flush keep their order (the retry field first,
// heartbeats and frames as written).
func TestBufferGivenBack(t *testing.T) {
	c := newRecorded(t)
	it := &hub.Item{ID: "01JX0000000000000000000001", Frame: []byte(`{"type":"event"}`)}
	if err := c.t.Heartbeat("srv-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.t.WriteItem(it); err != nil {
		t.Fatal(err)
	}
	if c.t.bw == nil {
		t.Fatal("no buffer while a batch is written")
	}
	if err := c.t.Flush(); err != nil {
		t.Fatal(err)
	}
	if c.t.bw != nil {
		t.Fatal("the buffer is still held after the flush")
	}
	if err := c.t.Write("", []byte(`{"type":"close"}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.t.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "retry: 2000\n\n: ping\n\n" + goSSE(t, it.ID, it.Frame) + goSSE(t, "", []byte(`{"type":"close"}`))
	if got := c.rec.Body.String(); got != want {
		t.Fatalf("wrote\n%q\nwant\n%q", got, want)
	}
	if !bytes.HasPrefix(c.rec.Body.Bytes(), []byte("retry:")) || c.rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("not an event stream: %q", c.rec.Header())
	}
}
