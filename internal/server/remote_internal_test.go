package server

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/config"
)

// TestReadyNoteNonLoopback: bound to every interface, the ready line
// says the server is reachable from the network and where the token
// file is, never the token. (Tests do not listen beyond loopback, so
// this checks the note itself.)
func TestReadyNoteNonLoopback(t *testing.T) {
	cfg := config.Defaults()
	cfg.Home = t.TempDir()
	cfg.Addr = "0.0.0.0:8421"
	r, err := setupRemote(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	note := r.readyNote("0.0.0.0:8421")
	for _, want := range []string{"reachable from the network (bound to 0.0.0.0:8421)", r.tokenPath, "just generated"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	if strings.Contains(note, r.token) {
		t.Fatalf("the note shows the token: %q", note)
	}
	// The next start reuses the file and says nothing of generating it.
	r2, err := setupRemote(cfg, slog.New(slog.DiscardHandler))
	if err != nil || r2.token != r.token || strings.Contains(r2.readyNote("0.0.0.0:8421"), "generated") {
		t.Fatalf("second start: %v, same token %v, note %q", err, r2.token == r.token, r2.readyNote("0.0.0.0:8421"))
	}
	// Loopback without a public name or token file: no note, no token.
	cfg.Addr = "127.0.0.1:8421"
	cfg.Home = t.TempDir()
	r3, err := setupRemote(cfg, slog.New(slog.DiscardHandler))
	if err != nil || r3.token != "" || r3.readyNote(cfg.Addr) != "" {
		t.Fatalf("loopback: %v %q", err, r3.readyNote(cfg.Addr))
	}
}
