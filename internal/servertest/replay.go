package servertest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// Fataler is a *testing.T or a *rapid.T.
type Fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// CheckReplay reconnects to sid with since over tr, asking for the
// catalog types of catalog (every type when catalog is nil), and fails
// unless the replay is this server's store's answer byte for byte: the
// stored catalog events of (since, seam] the filter takes, and, when
// catalog is nil, the streaming events of deltas (by id) in that range,
// each framed from the event's bytes, in id order, exactly as many as
// the ack's replay_event_count. A refusal with replay_too_large is not
// a failure (a cursor far back); CheckReplay then returns false.
func (h *Harness) CheckReplay(fail Fataler, tr streamtest.Transport, sid, since string, catalog []string, deltas map[string]*event.Event) bool {
	var filter any = event.PresetFull
	if catalog != nil {
		filter = protocol.Filter{EventTypes: catalog}
	}
	c := tr.Connect(h.T, h.URL, sid, nil)
	defer c.Close()
	c.Subscribe(filter, &since, false)
	f := c.Read(10 * time.Second)
	if f.Err != nil {
		if f.Err.Code == protocol.CodeReplayTooLarge {
			return false
		}
		fail.Fatalf("%s: subscribe since %s: %s: %s", tr.Name, since, f.Err.Code, f.Err.Message)
	}
	if f.Ack == nil {
		fail.Fatalf("%s: want the ack, got %s", tr.Name, f.Raw)
	}
	seam := f.Ack.SeamEventID
	var got [][]byte
	for len(got) < f.Ack.ReplayEventCount {
		fr := c.Read(10 * time.Second)
		switch fr.Type {
		case protocol.TypePing, protocol.TypePong:
			continue
		case protocol.TypeEvent:
			got = append(got, fr.Raw)
		default:
			fail.Fatalf("%s: unexpected %s frame in the replay: %s", tr.Name, fr.Type, fr.Raw)
		}
	}
	stored, err := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, AfterID: since, UpToID: seam})
	if err != nil {
		fail.Fatal(err)
	}
	var want []*event.Event
	for _, ev := range stored {
		if catalog == nil || slices.Contains(catalog, string(ev.Type)) {
			want = append(want, ev)
		}
	}
	if catalog == nil {
		for id, ev := range deltas {
			if ev.SessionID == sid && id > since && id <= seam {
				want = append(want, ev)
			}
		}
	}
	slices.SortFunc(want, func(a, b *event.Event) int { return strings.Compare(a.ID, b.ID) })
	if len(got) != len(want) {
		fail.Fatalf("%s: since %s: %d events replayed (ack says %d), the store's answer has %d", tr.Name, since, len(got), f.Ack.ReplayEventCount, len(want))
	}
	for i, ev := range want {
		if frame := protocol.EventFrame(ev.JSON()); !bytes.Equal(got[i], frame) {
			fail.Fatalf("%s: since %s: event %d:\n got  %s\n want %s", tr.Name, since, i, got[i], frame)
		}
	}
	return true
}

var replaysLine = regexp.MustCompile(`(?m)^metis_stream_replays_total\{source="(\w+)"\} (\d+)`)

// ReplayCounts reads metis_stream_replays_total by source (memory,
// store, mixed).
func (h *Harness) ReplayCounts() map[string]int {
	h.T.Helper()
	resp, err := http.Get(h.URL + "/metrics")
	if err != nil {
		h.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.T.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range replaysLine.FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}
