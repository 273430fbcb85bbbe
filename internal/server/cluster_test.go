package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/server"
)

// TestClusterRefusesReadableCredentials: a NATS credentials file that
// group or others may read is refused before anything connects, like
// the token file; so is a node name that cannot be a subject token.
func TestClusterRefusesReadableCredentials(t *testing.T) {
	home := t.TempDir()
	creds := filepath.Join(t.TempDir(), "nats.creds")
	if err := os.WriteFile(creds, []byte("-----BEGIN NATS USER JWT-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Home, cfg.Addr = home, "127.0.0.1:0"
	cfg.NATS, cfg.NATSCreds, cfg.Node = "nats://127.0.0.1:1", creds, "n1"
	_, err := server.New(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "group or others may read it") {
		t.Fatalf("server.New with a 0644 credentials file: %v", err)
	}

	cfg.NATSCreds, cfg.Node = "", "a.b"
	_, err = server.New(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "--node") {
		t.Fatalf("server.New with node name a.b: %v", err)
	}
}

// TestClusterRefusesAStreamingTTLTheLogCannotKeep: the log keeps a
// streaming event's TTL in whole seconds, at least one; any other
// --streaming-ttl is refused at start, before connecting.
func TestClusterRefusesAStreamingTTLTheLogCannotKeep(t *testing.T) {
	cfg := config.Defaults()
	cfg.Home, cfg.Addr = t.TempDir(), "127.0.0.1:0"
	cfg.NATS, cfg.Node = "nats://127.0.0.1:1", "n1"
	for _, ttl := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond} {
		cfg.StreamingTTL = ttl
		_, err := server.New(context.Background(), cfg, nil)
		if err == nil || !strings.Contains(err.Error(), "--streaming-ttl") {
			t.Fatalf("server.New with --streaming-ttl %s: %v", ttl, err)
		}
	}
}
