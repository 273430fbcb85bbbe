package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/metis-agent/metis/protocol"
)

// TestCloseDetailEncode: a close detail's WebSocket encoding never
// passes MaxCloseReason bytes and always keeps the code; it keeps the
// message and as many numbers as fit, in order, dropping the last
// first; the whole detail goes out when it fits.
func TestCloseDetailEncode(t *testing.T) {
	slow := protocol.CloseDetail{CloseReason: protocol.ReasonClientTooSlow, QueueEvents: 1000, QueueBytes: 8 << 20, StalledMS: 300}
	cases := []struct {
		d    protocol.CloseDetail
		want protocol.CloseDetail // what decodes back
	}{
		{protocol.CloseDetail{CloseReason: protocol.ReasonShutdown}, protocol.CloseDetail{CloseReason: protocol.ReasonShutdown}},
		{protocol.CloseDetail{CloseReason: protocol.ReasonHeartbeatTimeout, MissedPings: 3},
			protocol.CloseDetail{CloseReason: protocol.ReasonHeartbeatTimeout, MissedPings: 3}},
		{protocol.CloseDetail{CloseReason: protocol.ReasonClientTooSlow, QueueEvents: 1000},
			protocol.CloseDetail{CloseReason: protocol.ReasonClientTooSlow, QueueEvents: 1000}},
		{slow, protocol.CloseDetail{CloseReason: protocol.ReasonClientTooSlow, QueueEvents: 1000}},
		{protocol.CloseDetail{CloseReason: protocol.CloseReason{Code: "x", Message: strings.Repeat("m", 200)}, QueueEvents: 1},
			protocol.CloseDetail{CloseReason: protocol.CloseReason{Code: "x"}}},
	}
	for _, c := range cases {
		enc := c.d.Encode()
		var back protocol.CloseDetail
		if len(enc) > protocol.MaxCloseReason || json.Unmarshal([]byte(enc), &back) != nil || back != c.want {
			t.Errorf("%+v encodes as %d bytes %s; want %+v", c.d, len(enc), enc, c.want)
		}
	}
	// The whole detail, as the SSE close frame carries it.
	b, err := json.Marshal(protocol.CloseFrame{Type: protocol.TypeClose, Code: protocol.ClosePolicyViolation, Reason: slow})
	if err != nil {
		t.Fatal(err)
	}
	f, err := protocol.DecodeServerFrame(b)
	if err != nil || f.Close == nil || f.Close.Code != 1008 || f.Close.Reason != slow {
		t.Fatalf("%s decodes to %+v, %v", b, f.Close, err)
	}
}
