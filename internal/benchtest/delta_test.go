package benchtest_test

import (
	"encoding/json"
	"testing"

	"github.com/metis-agent/metis/internal/benchtest"
)

// TestDeltaSeqReadsTheSequenceOfAnEncodedDelta: the number DeltaText
// puts in a delta is what DeltaSeq reads back from the frame that
// carries it, and anything else is -1.
func TestDeltaSeqReadsTheSequenceOfAnEncodedDelta(t *testing.T) {
	for _, seq := range []int{0, 7, 42, 12345678, 99999999} {
		payload, err := json.Marshal(benchtest.DeltaPayload{MessageID: "msg_x", Text: benchtest.DeltaText(seq)})
		if err != nil {
			t.Fatal(err)
		}
		frame := []byte(`{"type":"event","event":{"type":"text.delta","payload":` + string(payload) + `}}`)
		if got := benchtest.DeltaSeq(frame); got != seq {
			t.Errorf("DeltaSeq of delta %d = %d", seq, got)
		}
	}
	for _, frame := range []string{
		``,
		`{"type":"event","event":{"type":"turn.started"}}`,
		`{"text":"#1234567"}`, // too short
		`"text":"#1234567`,
		`{"text":"#1234x678 the quick"}`,
		`{"text":"hello"}`,
	} {
		if got := benchtest.DeltaSeq([]byte(frame)); got != -1 {
			t.Errorf("DeltaSeq(%s) = %d, want -1", frame, got)
		}
	}
	if got := benchtest.DeltaTexts(3); len(got) != 3 || got[2] != benchtest.DeltaText(2) {
		t.Errorf("DeltaTexts(3) = %q", got)
	}
}

func FuzzDeltaSeq(f *testing.F) {
	f.Add([]byte(`{"text":"#00000042 the quick"}`))
	f.Add([]byte(`"text":"#`))
	f.Add([]byte(`"text":"#9999999`))
	f.Fuzz(func(t *testing.T, frame []byte) {
		n := benchtest.DeltaSeq(frame)
		if n < -1 || n > 99999999 {
			t.Fatalf("DeltaSeq(%q) = %d", frame, n)
		}
		// A frame holding a delta text first parses to its number.
		if n >= 0 {
			return
		}
		withDelta := append([]byte(`"text":"`+benchtest.DeltaText(31)+`"`), frame...)
		if got := benchtest.DeltaSeq(withDelta); got != 31 {
			t.Fatalf("DeltaSeq(%q) = %d, want 31", withDelta, got)
		}
	})
}
