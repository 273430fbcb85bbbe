package clustertest_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

// stall holds the write lock of node h's SQLite store, so that its
// projection cannot apply anything the log gets until release is
// called: the node's store lags behind the log, as it does for an
// instant after any commit elsewhere, for as long as the test wants.
func stall(t *testing.T, h *servertest.Harness) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(h.Home, "metis.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Error(err)
		}
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// whileStalled runs read on node h while h's projection is stalled, and
// lets the projection go on a moment after the read started: a node
// without read-your-writes answers from its stale store, one with it
// waits for the projection and answers with the write.
func whileStalled(t *testing.T, release func(), read func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		read()
	}()
	select {
	case <-done: // answered without waiting: it did not see the write
	case <-time.After(300 * time.Millisecond):
	}
	release()
	<-done
}

// TestReadYourWritesAcrossNodes: a client that wrote on node A reads on
// node B at once, while B's projection has not applied the write yet:
// the session it created (GET /sessions/{id}, its messages, the session
// list, a WebSocket or SSE stream, a turn submitted through B) and the messages of
// a turn it watched end on A are all there, because B first lets its
// projection catch up with the log.
func TestReadYourWritesAcrossNodes(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")

	// A session created on A, read on B.
	release := stall(t, b)
	sid := a.CreateSession()
	var got struct {
		SessionID string `json:"session_id"`
	}
	whileStalled(t, release, func() {
		if st := b.Do(http.MethodGet, "/sessions/"+sid, nil, &got); st != http.StatusOK || got.SessionID != sid {
			t.Errorf("GET /sessions/%s on node b right after its creation on node a: %d %+v", sid, st, got)
		}
	})

	// The session list and the messages of a new session.
	release = stall(t, b)
	sid2 := a.CreateSession()
	whileStalled(t, release, func() {
		var list struct {
			Sessions []struct {
				ID string `json:"id"`
			} `json:"sessions"`
		}
		if st := b.Do(http.MethodGet, "/sessions", nil, &list); st != http.StatusOK || len(list.Sessions) == 0 || list.Sessions[0].ID != sid2 {
			t.Errorf("GET /sessions on node b right after a creation on node a: %d, %+v; want %s first", st, list, sid2)
		}
	})
	release = stall(t, b)
	sid3 := a.CreateSession()
	whileStalled(t, release, func() {
		if st := b.Do(http.MethodGet, "/sessions/"+sid3+"/messages", nil, nil); st != http.StatusOK {
			t.Errorf("GET /sessions/%s/messages on node b right after its creation on node a: %d", sid3, st)
		}
	})

	// A turn that ended on A: its messages on B, the same as on A.
	type page struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	msgIDs := func(p page) []string {
		var out []string
		for _, m := range p.Messages {
			out = append(out, m.ID)
		}
		return out
	}
	turn := a.Submit(sid, "hello")
	a.WaitTurn(sid)
	release = stall(t, b)
	turn2 := a.Submit(sid, "and again")
	a.WaitTurn(sid)
	var onA page
	if st := a.Do(http.MethodGet, "/sessions/"+sid+"/messages", nil, &onA); st != http.StatusOK {
		t.Fatalf("messages on node a: %d", st)
	}
	whileStalled(t, release, func() {
		var onB page
		if st := b.Do(http.MethodGet, "/sessions/"+sid+"/messages", nil, &onB); st != http.StatusOK || !slices.Equal(msgIDs(onB), msgIDs(onA)) {
			t.Errorf("messages on node b right after turns %s and %s ended on node a: %d %v, want node a's %v", turn, turn2, st, msgIDs(onB), msgIDs(onA))
		}
	})

	// A turn submitted through B for a session B has not applied yet.
	release = stall(t, b)
	sid4 := a.CreateSession()
	whileStalled(t, release, func() {
		var r struct {
			TurnID string `json:"turn_id"`
		}
		if st := b.Do(http.MethodPost, "/sessions/"+sid4+"/turns", map[string]string{"content": "hi"}, &r); st != http.StatusAccepted || r.TurnID == "" {
			t.Errorf("a turn submitted to node b right after the session's creation on node a: %d %+v", st, r)
		}
	})
	a.WaitTurn(sid4)

	// A WebSocket client of B, right after the creation on A: its
	// attach token (GET /sessions/{id}) and its subscription.
	release = stall(t, b)
	sid6 := a.CreateSession()
	whileStalled(t, release, func() {
		c := streamtest.Attach(t, b.URL, sid6)
		defer c.Close()
		c.Subscribe("preset:chat", nil, true)
		if f := c.Read(wait); f.Ack == nil {
			t.Errorf("WebSocket on node b right after the session's creation on node a: %s", f.Raw)
		}
	})

	// An SSE stream opened on B right after the creation on A.
	release = stall(t, b)
	sid5 := a.CreateSession()
	whileStalled(t, release, func() {
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL+"/sessions/"+sid5+"/events?preset=chat", nil)
		if err != nil {
			t.Error(err)
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("SSE on node b right after the session's creation on node a: %d", resp.StatusCode)
			return
		}
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Errorf("SSE on node b: %v", err)
				return
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var f struct {
					Type string `json:"type"`
				}
				if err := json.Unmarshal([]byte(data), &f); err != nil || f.Type != "subscribe_ack" {
					t.Errorf("SSE on node b: first frame %s", data)
				}
				return
			}
		}
	})
}
