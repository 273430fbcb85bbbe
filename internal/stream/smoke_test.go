package stream_test

import (
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

func TestSmokeFreshAttach(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	c := streamtest.Attach(t, h.URL, sid)
	c.Subscribe("preset:chat", nil, true)
	ack := c.Read(5 * time.Second)
	if ack.Ack == nil {
		t.Fatalf("want ack, got %s", ack.Raw)
	}
	snap := c.Read(5 * time.Second)
	if snap.Snap == nil {
		t.Fatalf("want snapshot, got %s", snap.Raw)
	}
	turn := h.Submit(sid, "hello")
	evs := c.Events(5*time.Second, streamtest.UntilType(event.TurnCompleted, turn))
	t.Logf("%d events; first %s last %s", len(evs), evs[0].Type, evs[len(evs)-1].Type)
}
