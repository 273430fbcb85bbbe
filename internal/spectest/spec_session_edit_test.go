package spectest_test

import (
	"net/http"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestRenameAndArchiveReachOtherClients: PATCH /sessions/{id} "title"
// and "archived" commit session.updated (the fields changed, the title
// as stored), which a client following the session sees live (in
// preset:chat) and a client replaying from before it sees again; the
// same values again change nothing and commit nothing.
func TestRenameAndArchiveReachOtherClients(t *testing.T) {
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		{
			h := servertest.Start(t, "")
			sid := h.CreateSession()
			c, ack, _ := attachSub(t, tr, h, sid, protocol.PresetChat, nil, false)

			var s protocol.SessionSummary
			if st := h.Do("PATCH", "/sessions/"+sid, map[string]any{"title": "  my   session ", "archived": true}, &s); st != http.StatusOK ||
				s.Title != "my session" || !s.Archived {
				t.Fatalf("PATCH: %d %+v", st, s)
			}
			live := nextOfType(t, c, event.SessionUpdated)
			p := payload[protocol.SessionEdit](t, live)
			if p.Title == nil || *p.Title != "my session" || p.Archived == nil || !*p.Archived || live.Actor != event.ActorUser {
				t.Fatalf("session.updated live: %s %+v", live.Actor, p)
			}
			// The same title again, and a change of archived only.
			s = protocol.SessionSummary{}
			if st := h.Do("PATCH", "/sessions/"+sid, map[string]any{"title": "my session", "archived": false}, &s); st != http.StatusOK || s.Archived {
				t.Fatalf("PATCH back: %d %+v", st, s)
			}
			second := payload[protocol.SessionEdit](t, nextOfType(t, c, event.SessionUpdated))
			if second.Title != nil || second.Archived == nil || *second.Archived {
				t.Fatalf("session.updated of an unarchive: %+v", second)
			}
			// Nothing changes: no event. The turn after it is the next
			// thing the client sees.
			h.Do("PATCH", "/sessions/"+sid, map[string]any{"archived": false}, nil)
			turn := h.Submit(sid, "/echo hi")
			if n := streamtest.CountType(until(t, c, event.TurnCompleted, turn), event.SessionUpdated); n != 0 {
				t.Fatalf("%d session.updated for a PATCH that changed nothing", n)
			}

			since := ack.SeamEventID
			r, rack, _ := attachSub(t, tr, h, sid, protocol.PresetChat, &since, false)
			replayed := streamtest.ReadEvents(t, r, readTimeout, rack.ReplayEventCount)
			var got []protocol.SessionEdit
			for _, e := range replayed {
				if e.Type == string(event.SessionUpdated) {
					got = append(got, payload[protocol.SessionEdit](t, e))
				}
			}
			if len(got) != 2 || got[0].Title == nil || *got[0].Title != "my session" || got[1].Archived == nil || *got[1].Archived {
				t.Fatalf("session.updated in the replay: %+v", got)
			}
		}
	})
}
