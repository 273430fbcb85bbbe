package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/metis-agent/metis/client"
)

// TestSessionsStopsOnAStuckCursor: a server that answers has_more with
// the cursor it was given (or none) ends the walk with an error instead
// of looping forever.
func TestSessionsStopsOnAStuckCursor(t *testing.T) {
	for name, next := range map[string]string{"same cursor": "c1", "no cursor": ""} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "application/json")
				body := `{"sessions":[{"id":"sess_a"}],"has_more":true,"next":"c1"}`
				if r.URL.Query().Get("before") != "" {
					body = fmt.Sprintf(`{"sessions":[{"id":"sess_b"}],"has_more":true,"next":%q}`, next)
				}
				fmt.Fprint(w, body)
			}))
			defer srv.Close()
			ss, err := client.New(srv.URL).Sessions(context.Background())
			if err == nil || !strings.Contains(err.Error(), "does not advance") {
				t.Fatalf("Sessions = %v, %v; want an error", ss, err)
			}
			if calls.Load() != 2 {
				t.Fatalf("%d requests, want 2", calls.Load())
			}
		})
	}
}
