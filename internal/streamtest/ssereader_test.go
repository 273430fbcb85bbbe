package streamtest

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// records parses a whole stream.
func records(t testing.TB, r io.Reader) []sseRecord {
	t.Helper()
	p := newSSEReader(r)
	var out []sseRecord
	for {
		rec, err := p.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("after %d records: %v", len(out), err)
		}
		out = append(out, rec)
	}
}

func ev(data, id string, hasID bool) sseRecord {
	return sseRecord{kind: recEvent, typ: "message", data: data, id: id, hasID: hasID}
}

// TestSSEReader: the event stream interpretation of the HTML standard,
// the parts a server may use.
func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []sseRecord
	}{
		{"lf", "data: a\n\n", []sseRecord{ev("a", "", false)}},
		{"crlf", "data: a\r\n\r\n", []sseRecord{ev("a", "", false)}},
		{"cr", "data: a\r\r", []sseRecord{ev("a", "", false)}},
		{"mixed ends", "data: a\r\ndata: b\rdata: c\n\r\n", []sseRecord{ev("a\nb\nc", "", false)}},
		{"bom dropped once", "\ufeffdata: a\n\n\ufeffdata: b\n\n", []sseRecord{ev("a", "", false)}},
		{"one space dropped", "data:a\n\ndata:  b\n\n", []sseRecord{ev("a", "", false), ev(" b", "", false)}},
		{"colon in value", `data: {"a":"b: c"}` + "\n\n", []sseRecord{ev(`{"a":"b: c"}`, "", false)}},
		{"empty data line", "data\n\n", []sseRecord{ev("", "", false)}},
		{"comments", ": ping\n:\n:  two\n", []sseRecord{
			{kind: recComment, comment: "ping"}, {kind: recComment}, {kind: recComment, comment: " two"}}},
		{"retry", "retry: 1500\n\nretry: 1x\n\nretry:\n\n", []sseRecord{{kind: recRetry, retry: 1500}}},
		{"ids persist", "id: 1\ndata: a\n\ndata: b\n\nid: 2\n\ndata: c\n\n", []sseRecord{
			ev("a", "1", true), ev("b", "1", false), ev("c", "2", false)}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n", []sseRecord{ev("a", "1", true), ev("b", "1", false)}},
		{"empty id resets", "id: 1\ndata: a\n\nid\ndata: b\n\n", []sseRecord{ev("a", "1", true), ev("b", "", true)}},
		{"named event", "event: close\ndata: x\n\ndata: y\n\n", []sseRecord{
			{kind: recEvent, typ: "close", data: "x"}, ev("y", "", false)}},
		{"unknown fields ignored", "foo: bar\ndata: a\nDATA: b\n\n", []sseRecord{ev("a", "", false)}},
		{"no data, no event", "id: 7\nevent: x\n\n\n", nil},
		{"incomplete block dropped", "data: a\n\ndata: b\n", []sseRecord{ev("a", "", false)}},
		{"unterminated line dropped", "data: a\n\ndata: b", []sseRecord{ev("a", "", false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				if got := records(t, r); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("%q:\n got %+v\nwant %+v", tc.in, got, tc.want)
				}
			}
		})
	}
}

// TestSSEReaderCRDoesNotWait: a line ended by a CR is returned before
// the next byte arrives (a LF may follow it, or not), and a LF that does
// follow belongs to that line's end.
func TestSSEReaderCRDoesNotWait(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() { _, _ = pw.Write([]byte(": ping\r")) }() // and nothing more for now
	p := newSSEReader(pr)
	rec, err := p.next()
	if err != nil || rec.kind != recComment || rec.comment != "ping" {
		t.Fatalf("%+v %v", rec, err)
	}
	go func() { _, _ = pw.Write([]byte("\ndata: a\r")); _, _ = pw.Write([]byte("\ndata: b\n\n")); pw.Close() }()
	rec, err = p.next()
	if err != nil || !reflect.DeepEqual(rec, ev("a\nb", "", false)) {
		t.Fatalf("after the CR: %+v %v", rec, err)
	}
	if _, err := p.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v", err)
	}
}

// FuzzSSEReader: any input parses without panicking, the same way
// however it is split into reads, and what comes out could not have
// been split differently (no line end inside a value, no NUL in an id).
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"retry: 3000\n\ndata: {\"type\":\"subscribe_ack\"}\n\nid: evt_1\ndata: {\"type\":\"event\"}\n\n: ping\n\n",
		"\ufeffdata: a\r\n\r\ndata: b\rdata: c\r\r",
		"id: x\x00\ndata\n\nevent: close\ndata: {}\n\n",
		"data: a\n\ndata: b",
		":\r\n:\n\r\r",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := records(t, strings.NewReader(string(in)))
		bytewise := records(t, iotest.OneByteReader(strings.NewReader(string(in))))
		if !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("%q parses differently byte by byte:\n%+v\n%+v", in, whole, bytewise)
		}
		for _, r := range whole {
			if strings.ContainsAny(r.comment+r.typ+r.id, "\r\n") || strings.ContainsRune(r.data, '\r') || strings.ContainsRune(r.id, 0) {
				t.Fatalf("%q gave %+v", in, r)
			}
			if r.kind == recEvent && r.data == "" && !strings.Contains(string(in), "data") {
				t.Fatalf("%q: an event without a data field: %+v", in, r)
			}
		}
	})
}
