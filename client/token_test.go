package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// TestFollowSendsTheTokenToItsServerOnly: a server (or anything between)
// answering a ws_url on another host or port, or a plain ws:// one for
// an https server, does not get the token sent there: Follow stops with
// an error naming the URL instead of dialing it.
func TestFollowSendsTheTokenToItsServerOnly(t *testing.T) {
	var mu sync.Mutex
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer other.Close()
	for _, ws := range []string{
		strings.Replace(other.URL, "http://", "ws://", 1) + "/sessions/sess_a/stream?attach=atk_x", // another port
		"ws://evil.example/sessions/sess_a/stream?attach=atk_x",                                    // another host
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(protocol.AttachInfo{SessionID: "sess_a", AttachToken: "atk_x", WSURL: ws})
		}))
		c := client.New(srv.URL)
		c.Token = "the-token-0123456789-abcdefgh"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.Follow(ctx, "sess_a", client.FollowOptions{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
		cancel()
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "refusing to send the token") {
			t.Fatalf("ws_url %s: Follow returned %v, want a refusal", ws, err)
		}
	}
	// An https server answering a plain ws:// URL on its own host and
	// port: a downgrade.
	var tlsSrv *httptest.Server
	tlsSrv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		ws := strings.Replace(tlsSrv.URL, "https://", "ws://", 1) + "/sessions/sess_a/stream?attach=atk_x"
		_ = json.NewEncoder(w).Encode(protocol.AttachInfo{SessionID: "sess_a", AttachToken: "atk_x", WSURL: ws})
	}))
	defer tlsSrv.Close()
	c := client.New(tlsSrv.URL)
	c.HTTP = tlsSrv.Client()
	c.Token = "the-token-0123456789-abcdefgh"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Follow(ctx, "sess_a", client.FollowOptions{}); err == nil || !strings.Contains(err.Error(), "refusing to send the token") {
		t.Fatalf("a ws:// stream of an https server: Follow returned %v, want a refusal", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) != 0 {
		t.Fatalf("the other server was dialed: %q", elsewhere)
	}
}
