package protocol_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/metis-agent/metis/protocol"
)

// TestWriteHTTPError: the error answer of every edge is the JSON body of
// contract §3 with its status, and a client decodes it with HTTPError.
func TestWriteHTTPError(t *testing.T) {
	rec := httptest.NewRecorder()
	protocol.WriteHTTPError(rec, http.StatusConflict, protocol.CodeTurnInFlight, `a "turn" runs`)
	if rec.Code != http.StatusConflict {
		t.Fatalf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no nosniff")
	}
	var raw map[string]map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	if got := raw["error"]; got["code"] != "turn_in_flight" || got["message"] != `a "turn" runs` || len(got) != 2 {
		t.Fatalf("body %q", rec.Body.String())
	}
	var e protocol.HTTPError
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != protocol.CodeTurnInFlight {
		t.Fatalf("HTTPError %+v, %v", e, err)
	}
}
