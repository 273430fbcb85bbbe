package clustertest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// A deletion reaches every node through the log (docs/scale-out.md,
// "Rename, archive and delete anywhere"): not only the owner and the
// node asked, but a third node, and one that was down when it
// happened.

// gone waits until node h neither serves sid (GET /sessions/{id} and
// its messages are 404) nor lists it.
func gone(t *testing.T, h *servertest.Harness, sid string) {
	t.Helper()
	servertest.WaitFor(t, "the deleted session gone from "+h.Config.Node, func() bool {
		_, ok := listed(t, h, sid)
		return !ok && h.Do(http.MethodGet, "/sessions/"+sid, nil, nil) == http.StatusNotFound
	})
	if st, body := raw(t, h, http.MethodGet, "/sessions/"+sid+"/messages", ""); st != http.StatusNotFound {
		t.Errorf("GET messages of the deleted session on %s: %d %s", h.Config.Node, st, body)
	}
}

// deleteOn deletes sid through node h, which must answer 204.
func deleteOn(t *testing.T, h *servertest.Harness, sid string) {
	t.Helper()
	if st, body := raw(t, h, http.MethodDelete, "/sessions/"+sid, ""); st != http.StatusNoContent {
		t.Fatalf("DELETE on %s: %d %s", h.Config.Node, st, body)
	}
}

// TestDeleteReachesEveryNode: a session created on node a (its owner)
// and deleted through node b is gone from node c too, which neither
// owns it nor was asked: its list, the session and its messages. The
// node asked shows it gone at its answer. c's projection goes on
// applying the log after the deletion (a session created later shows
// up there), and deleting the session again is 404 on every node.
func TestDeleteReachesEveryNode(t *testing.T) {
	url := startNATS(t)
	a, b, c := node(t, url, "node-a"), node(t, url, "node-b"), node(t, url, "node-c")
	sid := a.CreateSession()
	a.Submit(sid, "/echo before the deletion")
	a.WaitTurn(sid)
	kept := a.CreateSession()
	for _, h := range []*servertest.Harness{b, c} {
		servertest.WaitFor(t, "the turn's end on "+h.Config.Node, func() bool {
			s, st := summaryOn(t, h, sid)
			return st == http.StatusOK && s.CurrentTurnID == nil && s.ContextTokens > 0
		})
	}

	deleteOn(t, b, sid)
	if st, body := raw(t, b, http.MethodGet, "/sessions/"+sid, ""); st != http.StatusNotFound {
		t.Errorf("GET on the node asked, at its answer: %d %s", st, body)
	}
	for _, h := range []*servertest.Harness{a, b, c} {
		gone(t, h, sid)
		if _, ok := listed(t, h, kept); !ok {
			t.Errorf("%s lost the session the deletion did not name", h.Config.Node)
		}
	}

	later := a.CreateSession()
	visible(t, c, later)
	for _, h := range []*servertest.Harness{a, b, c} {
		if st, _ := raw(t, h, http.MethodDelete, "/sessions/"+sid, ""); st != http.StatusNotFound {
			t.Errorf("a second DELETE on %s: %d", h.Config.Node, st)
		}
	}
}

// TestDeleteReachesANodeThatWasDown: a node that was stopped while a
// session was deleted no longer serves it once it is back: its
// projection applies the deletion as it catches up with the log.
func TestDeleteReachesANodeThatWasDown(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	c := node(t, url, "node-c")
	sid := a.CreateSession()
	a.Submit(sid, "/echo before the deletion")
	a.WaitTurn(sid)
	servertest.WaitFor(t, "the turn's end on node-c", func() bool {
		s, st := summaryOn(t, c, sid)
		return st == http.StatusOK && s.CurrentTurnID == nil && s.ContextTokens > 0
	})
	home := c.Home
	c.Stop()

	deleteOn(t, b, sid)
	gone(t, a, sid)

	c = servertest.Start(t, home, func(cfg *config.Config) {
		cfg.NATS = url
		cfg.Node = "node-c"
		cfg.DemoDelay = time.Millisecond
	})
	gone(t, c, sid)
}
