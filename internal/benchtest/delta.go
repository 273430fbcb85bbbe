package benchtest

import (
	"bytes"
	"fmt"
)

// The benchmarks' text deltas carry a sequence number in their text
// ("#00000042 the quick", the size of a typical model delta), which a
// Reader parses to match each frame with its emit time.

// DeltaPayload is the agent's text.delta payload (internal/agent).
type DeltaPayload struct {
	MessageID string `json:"message_id"`
	Index     int    `json:"content_block_index"`
	Text      string `json:"text"`
}

// DeltaText is the text of delta seq (0 to 99,999,999).
func DeltaText(seq int) string { return fmt.Sprintf("#%08d the quick", seq) }

// DeltaTexts precomputes the texts of deltas 0 to n-1, so that an emit
// loop formats nothing.
func DeltaTexts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = DeltaText(i)
	}
	return out
}

var deltaKey = []byte(`"text":"#`)

// DeltaSeq returns the sequence number of the first delta text in frame
// (an encoded event frame, or anything holding `"text":"#` and eight
// digits), or -1 if it holds none.
func DeltaSeq(frame []byte) int {
	i := bytes.Index(frame, deltaKey)
	if i < 0 || len(frame) < i+len(deltaKey)+8 {
		return -1
	}
	n := 0
	for _, c := range frame[i+len(deltaKey) : i+len(deltaKey)+8] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
