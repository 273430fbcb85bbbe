package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
)

func TestFeedback(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	turn := h.Submit(sid, "/echo rate me")
	h.WaitTurn(sid)
	var ok map[string]string
	if st := h.Do("POST", "/sessions/"+sid+"/turns/"+turn+"/feedback", map[string]string{"rating": "up", "comment": "nice"}, &ok); st != http.StatusCreated || ok["event_id"] == "" {
		t.Fatalf("feedback: %d %v", st, ok)
	}
	evs, err := h.Server.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sid}, Types: []event.Type{event.FeedbackSubmitted}})
	servertest.Must(t, err)
	var p map[string]string
	json.Unmarshal(evs[0].Payload, &p)
	if len(evs) != 1 || evs[0].TurnID != turn || p["rating"] != "up" || p["comment"] != "nice" || evs[0].ID != ok["event_id"] {
		t.Fatalf("event %s %v", evs[0].JSON(), p)
	}
	cases := []struct {
		path string
		body any
		code int
		err  string
	}{
		{"/sessions/" + sid + "/turns/" + turn + "/feedback", map[string]string{"rating": "meh"}, 400, "invalid_request"},
		{"/sessions/" + sid + "/turns/" + turn + "/feedback", map[string]string{}, 400, "invalid_request"},
		{"/sessions/" + sid + "/turns/" + turn + "/feedback", map[string]string{"rating": "down", "comment": strings.Repeat("x", 4001)}, 400, "invalid_request"},
		{"/sessions/" + sid + "/turns/turn_nope/feedback", map[string]string{"rating": "down"}, 404, "turn_not_found"},
		{"/sessions/sess_nope/turns/" + turn + "/feedback", map[string]string{"rating": "down"}, 404, "session_not_found"},
	}
	for _, c := range cases {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if st := h.Do("POST", c.path, c.body, &e); st != c.code || e.Error.Code != c.err {
			t.Errorf("%s %v: %d %s, want %d %s", c.path, c.body, st, e.Error.Code, c.code, c.err)
		}
	}
}
