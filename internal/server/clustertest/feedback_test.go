package clustertest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/session"
)

// raw sends a request with body as is and returns the status and the
// answer's body.
func raw(t *testing.T, h *servertest.Harness, method, path, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), servertest.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v (a request is given %s)", method, path, h.Config.Node, err, servertest.RequestTimeout)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s on %s: reading the answer: %v", method, path, h.Config.Node, err)
	}
	return resp.StatusCode, string(b)
}

// TestFeedbackSentToANonOwnerIsRecordedByTheOwner: a turn's feedback
// posted to a node that does not own the session's tree is committed
// by the owner (its feedback.submitted event, with the id the
// non-owner answered, is the owner's), and every answer, good or bad,
// is the one the owner's API gives: same status, same body.
func TestFeedbackSentToANonOwnerIsRecordedByTheOwner(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	turn := a.Submit(sid, "hello")
	a.WaitTurn(sid)
	path := "/sessions/" + sid + "/turns/" + turn + "/feedback"

	status, body := raw(t, b, http.MethodPost, path, `{"rating":"up","comment":"routed"}`)
	var rep struct {
		EventID string `json:"event_id"`
	}
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &rep) != nil || rep.EventID == "" {
		t.Fatalf("feedback on node b: %d %s, want 201 with an event id", status, body)
	}
	servertest.WaitFor(t, "the owner's feedback.submitted", func() bool {
		for _, e := range a.Live.Events(sid) {
			if e.ID == rep.EventID {
				return e.Type == event.FeedbackSubmitted && strings.Contains(string(e.Payload), `"comment":"routed"`)
			}
		}
		return false
	})
	if holder := leaseHolder(t, url, sid); holder != "node-a" {
		t.Fatalf("the tree's lease is held by %q, want node-a", holder)
	}
	if status, body := raw(t, a, http.MethodPost, path, `{"rating":"down"}`); status != http.StatusCreated {
		t.Fatalf("feedback on the owner: %d %s", status, body)
	}

	// Refusals read the same on both nodes.
	for _, tc := range []struct{ what, path, body string }{
		{"a bad rating", path, `{"rating":"sideways"}`},
		{"a comment too long", path, `{"rating":"up","comment":"` + strings.Repeat("x", session.MaxFeedbackComment+1) + `"}`},
		{"an unknown turn", "/sessions/" + sid + "/turns/turn_nope/feedback", `{"rating":"up"}`},
		{"an empty body", path, ``},
		{"malformed JSON", path, `{"rating":`},
		{"data after the object", path, `{"rating":"up"} {}`},
		{"a wrong type", path, `{"rating":5}`},
	} {
		sa, ba := raw(t, a, http.MethodPost, tc.path, tc.body)
		sb, bb := raw(t, b, http.MethodPost, tc.path, tc.body)
		if sa < 400 || sa != sb || ba != bb {
			t.Errorf("%s: the owner answers %d %s, node b %d %s", tc.what, sa, ba, sb, bb)
		}
	}
}

// TestRoutedRefusalsReadAsTheOwners: a turn submission or a cancel sent
// to a node that does not own the tree is refused, when its body is
// bad, with the status and body the owner's API gives, and a cancel the
// owner answers comes back the same.
func TestRoutedRefusalsReadAsTheOwners(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	turn := a.Submit(sid, "hello")
	a.WaitTurn(sid)
	turns, cancel := "/sessions/"+sid+"/turns", "/sessions/"+sid+"/turns/"+turn+"/cancel"
	for _, tc := range []struct{ what, path, body string }{
		{"submit: an empty body", turns, ``},
		{"submit: malformed JSON", turns, `{"content":`},
		{"submit: data after the object", turns, `{"content":"x"} []`},
		{"submit: a wrong type", turns, `{"content":5}`},
		{"submit: no content", turns, `{"reason":"x"}`},
		{"cancel: malformed JSON", cancel, `{"reason"`},
		{"cancel: data after the object", cancel, `{} x`},
		{"cancel: a wrong type", cancel, `{"reason":5}`},
		{"cancel: a reason too long", cancel, `{"reason":"` + strings.Repeat("r", 201) + `"}`},
		{"cancel: another field of another type", cancel, `{"content":5}`},
		{"cancel: an ended turn", cancel, `{"reason":"user_cancel"}`},
		{"cancel: an unknown turn", "/sessions/" + sid + "/turns/turn_nope/cancel", `{}`},
	} {
		sa, ba := raw(t, a, http.MethodPost, tc.path, tc.body)
		sb, bb := raw(t, b, http.MethodPost, tc.path, tc.body)
		if sa != sb || ba != bb {
			t.Errorf("%s: the owner answers %d %s, node b %d %s", tc.what, sa, ba, sb, bb)
		}
	}
}
