package spectest_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// pumpClient is a stream client whose frames a goroutine reads into a
// channel once it has subscribed, so many clients can subscribe at once
// while the test goroutine checks them one after the other.
type pumpClient struct {
	t       *testing.T
	c       streamtest.Conn
	frames  chan streamtest.Frame
	stop    chan struct{}
	done    chan struct{}
	err     error // set before frames is closed
	started bool  // the reader runs
}

func dialPump(t *testing.T, tr streamtest.Transport, h *servertest.Harness, sid string) *pumpClient {
	t.Helper()
	p := &pumpClient{t: t, c: connect(t, tr, h, sid), frames: make(chan streamtest.Frame, 1024), stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(p.close)
	return p
}

// subscribe subscribes and starts reading.
func (p *pumpClient) subscribe(filter any, since *string, snapshot bool) {
	p.t.Helper()
	p.c.Subscribe(filter, since, snapshot)
	p.started = true
	go func() {
		defer close(p.done)
		defer close(p.frames)
		for {
			f, err := p.c.TryRead(time.Hour) // until close
			if err != nil {
				p.err = err
				return
			}
			select {
			case p.frames <- f:
			case <-p.stop:
				return
			}
		}
	}()
}

func (p *pumpClient) next() streamtest.Frame {
	p.t.Helper()
	timer := time.NewTimer(readTimeout)
	defer timer.Stop()
	select {
	case f, ok := <-p.frames:
		if !ok {
			p.t.Fatalf("connection ended: %v", p.err)
		}
		return f
	case <-timer.C:
		p.t.Fatal("no frame in time")
	}
	return streamtest.Frame{}
}

func (p *pumpClient) tryNext() (streamtest.Frame, bool) {
	timer := time.NewTimer(readTimeout)
	defer timer.Stop()
	select {
	case f, ok := <-p.frames:
		return f, ok
	case <-timer.C:
		return streamtest.Frame{}, false
	}
}

func lastOf(evs []*protocol.EventEnvelope) string {
	if len(evs) == 0 {
		return "none"
	}
	return evs[len(evs)-1].ID + " " + evs[len(evs)-1].Type
}

func (p *pumpClient) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.c.Close()
	if p.started {
		<-p.done
	}
}

// TestSpec11_1_16_SnapshotReplaySeam: while turns stream at full speed,
// clients repeatedly attach at the same moment with snapshot: true or
// since = a recent id. For every client, each event after the
// snapshot/replay boundary arrives exactly once and in order, and
// snapshot + events together are exactly the session's state: the
// snapshot holds the messages committed as of its seam, and the events
// are exactly those the session delivered after it.
func TestSpec11_1_16_SnapshotReplaySeam(t *testing.T) {
	streamtest.EachTransport(t, testSnapshotReplaySeam)
}

func testSnapshotReplaySeam(t *testing.T, tr streamtest.Transport) {
	// Queues large enough for the longest turn below: this test is about
	// the seam, not about slow clients.
	h := servertest.Start(t, "", demoDelay(0), clientQueue(100_000))
	sid := h.CreateSession()
	type snapRecord struct {
		snap *protocol.Snapshot
		it   int
		evs  []*protocol.EventEnvelope // what the client read after it
	}
	var snaps []snapRecord
	midTurn := 0
	const iterations = 20
	for it := range iterations {
		// Short turns race the subscribes hardest; while none has yet
		// been caught mid-turn (a slow or single-core machine), turns
		// grow until one is.
		prompt := "/long 20"
		if midTurn == 0 {
			prompt = fmt.Sprintf("/long %d", 20<<min(it, 6))
		}
		if it%3 == 0 && (midTurn > 0 || it < 3) {
			prompt = "what is in my workspace?"
		}
		// A cursor from the previous turn(s), a little further back
		// each time.
		so := h.Live.Events(sid)
		prev := so[max(0, len(so)-1-(it*37)%150)].ID
		kinds := []struct {
			filter   string
			snapshot bool
			since    string // "started": the current turn's turn.started
		}{
			{"preset:full", true, ""},
			{"preset:chat", true, ""},
			{"preset:full", false, prev},
			{"preset:chat", false, "started"},
		}
		clients := make([]*pumpClient, len(kinds))
		for i := range kinds {
			clients[i] = dialPump(t, tr, h, sid)
		}
		turn := h.Submit(sid, prompt)
		started := firstDelivered(t, h, sid, event.TurnStarted, turn).ID
		sinces := make([]string, len(kinds))
		for i, k := range kinds {
			switch k.since {
			case "":
			case "started":
				sinces[i] = started
			default:
				sinces[i] = k.since
			}
			var since *string
			if sinces[i] != "" {
				since = &sinces[i]
			}
			clients[i].subscribe(k.filter, since, k.snapshot)
		}
		h.WaitTurn(sid)
		end := firstDelivered(t, h, sid, event.TurnCompleted, turn).ID

		for i, c := range clients {
			k := kinds[i]
			var set map[string]bool
			if k.filter == "preset:chat" {
				set = streamtest.PresetTypes(event.PresetChat)
			}
			ack := c.next()
			if ack.Ack == nil {
				t.Fatalf("iteration %d client %d: want ack, got %s", it, i, ack.Raw)
			}
			lower := sinces[i]
			if k.snapshot {
				s := c.next()
				if s.Snap == nil {
					t.Fatalf("iteration %d client %d: want snapshot, got %s", it, i, s.Raw)
				}
				lower = s.Snap.SnapshotAtEventID
				snaps = append(snaps, snapRecord{snap: s.Snap, it: it})
				if lower > started && lower < end {
					midTurn++
				}
			} else if ack.Ack.StreamingGap {
				t.Fatalf("iteration %d client %d: streaming gap with a recent cursor", it, i)
			}
			var evs []*protocol.EventEnvelope
			for lower < end {
				f, ok := c.tryNext()
				if !ok {
					t.Fatalf("iteration %d client %d (%s, snapshot %v, since %q, ack %s, lower %s, end %s): no event after %d events (last %v); connection error %v",
						it, i, k.filter, k.snapshot, sinces[i], ack.Raw, lower, end, len(evs), lastOf(evs), c.err)
				}
				if f.Event == nil {
					t.Fatalf("iteration %d client %d: unexpected %s", it, i, f.Raw)
				}
				evs = append(evs, f.Event)
				if f.Event.ID >= end {
					break
				}
			}
			what := fmt.Sprintf("iteration %d client %d (%s, snapshot %v, since %q, ack %s, lower %s)", it, i, k.filter, k.snapshot, sinces[i], ack.Raw, lower)
			streamtest.CheckIncreasing(t, what, evs, lower)
			streamtest.SameIDs(t, what, evs, delivered(h, sid, lower, end, set))
			// The ack names the seam: the snapshot's id, or the last id the
			// replay covers; the replay is exactly (since, seam].
			seam := ack.Ack.SeamEventID
			if k.snapshot && seam != lower {
				t.Fatalf("%s: seam_event_id %q differs from snapshot_at_event_id", what, seam)
			}
			if !k.snapshot {
				replayed := delivered(h, sid, lower, seam, set)
				if seam < lower || ack.Ack.ReplayEventCount != len(replayed) || len(evs) < len(replayed) && seam < end {
					t.Fatalf("%s: replay_event_count %d, %d events in (since, seam]", what, ack.Ack.ReplayEventCount, len(replayed))
				}
				if seam < end {
					streamtest.SameIDs(t, what+": replay", evs[:len(replayed)], replayed)
				}
			}
			if k.snapshot {
				snaps[len(snaps)-1].evs = evs
			}
			c.close()
		}
	}
	if midTurn == 0 {
		t.Fatal("no snapshot was taken while a turn was streaming; the test did not exercise the seam")
	}
	t.Logf("%d of %d snapshots taken mid-turn", midTurn, len(snaps))

	final := messages(t, h, sid)
	anchor := anchors(t, h, sid, final)
	for _, r := range snaps {
		stored, inFlight := streamtest.InFlight(t, r.snap, anchor)
		want := streamtest.AsOf(final, anchor, r.snap.SnapshotAtEventID, h.Config.SnapshotMessages)
		if !streamtest.SameJSON(stored, want) {
			t.Fatalf("iteration %d: snapshot as of %s:\n got %s\nwant %s", r.it, r.snap.SnapshotAtEventID, streamtest.MessageIDs(stored), streamtest.MessageIDs(want))
		}
		if inFlight != nil {
			// The message in flight at the seam, continued by the events
			// after it, is the message as stored (contract §11).
			checkInFlight(t, r.it, inFlight, r.evs, final)
		}
		n := 0
		for _, m := range final {
			if anchor[m.ID] <= r.snap.SnapshotAtEventID {
				n++
			}
		}
		if r.snap.HasMoreMessages != (n > h.Config.SnapshotMessages) {
			t.Fatalf("iteration %d: has_more_messages %v with %d messages as of the seam", r.it, r.snap.HasMoreMessages, n)
		}
	}
}

// checkInFlight checks a snapshot's message in flight: streaming (or
// already complete, its model call not yet stored), never flagged
// start_missing with the default ring, and, folded with the events the
// client read after the seam, the message as stored.
func checkInFlight(t *testing.T, it int, m *message.Message, evs []*protocol.EventEnvelope, final []message.Message) {
	t.Helper()
	i := slices.IndexFunc(final, func(f message.Message) bool { return f.ID == m.ID })
	if i < 0 || m.StartMissing {
		t.Fatalf("iteration %d: message in flight %+v: not stored, or flagged start_missing", it, m)
	}
	got := m.Content
	if m.Status == protocol.StatusStreaming {
		var done bool
		if got, _, done = streamtest.Continue(t, m, m.ID, evs); !done {
			t.Fatalf("iteration %d: no message.complete of %s after the seam", it, m.ID)
		}
	}
	if d := streamtest.SameContent(got, final[i].Content); d != "" {
		t.Fatalf("iteration %d: message %s in flight, continued: %s", it, m.ID, d)
	}
}
