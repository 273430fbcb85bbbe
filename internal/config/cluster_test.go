package config

import (
	"testing"
	"time"
)

// TestClusterSettings: --nats, --nats-creds and --node, and their
// config.yaml keys (nats, nats_creds or nats-creds, node); flags win.
func TestClusterSettings(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "nats: nats://10.0.0.1:4222\nnats_creds: /etc/metis/nats.creds\nnode: from-file\n")
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS != "nats://10.0.0.1:4222" || c.NATSCreds != "/etc/metis/nats.creds" || c.Node != "from-file" {
		t.Fatalf("from the file: nats %q creds %q node %q", c.NATS, c.NATSCreds, c.Node)
	}
	c, err = Load([]string{"--home", dir, "--nats", "nats://127.0.0.1:4222", "--nats-creds", "/tmp/x.creds", "--node", "n2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS != "nats://127.0.0.1:4222" || c.NATSCreds != "/tmp/x.creds" || c.Node != "n2" {
		t.Fatalf("from the flags: nats %q creds %q node %q", c.NATS, c.NATSCreds, c.Node)
	}
	if d := Defaults(); d.NATS != "" || d.Node != "" || d.NATSCreds != "" {
		t.Fatalf("defaults are not single-node: %+v", d)
	}
}

// TestLeaseTTLSetting: --lease-ttl and the config key lease_ttl set the
// cluster's lease TTL, 10s by default; flags win.
func TestLeaseTTLSetting(t *testing.T) {
	if d := Defaults().LeaseTTL; d != 10*time.Second {
		t.Fatalf("default lease TTL %s, want 10s", d)
	}
	dir := t.TempDir()
	writeConfig(t, dir, "lease_ttl: 2s\n")
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.LeaseTTL != 2*time.Second {
		t.Fatalf("from the file: %s, want 2s", c.LeaseTTL)
	}
	c, err = Load([]string{"--home", dir, "--lease-ttl", "1500ms"})
	if err != nil {
		t.Fatal(err)
	}
	if c.LeaseTTL != 1500*time.Millisecond {
		t.Fatalf("from the flag: %s, want 1.5s", c.LeaseTTL)
	}
	if _, err := Load([]string{"--home", dir, "--lease-ttl", "-1s"}); err == nil {
		t.Fatal("a negative lease TTL was accepted")
	}
}

// TestStreamingTTLSetting: --streaming-ttl and the config key
// streaming_ttl set how long the cluster's log keeps streaming events,
// 15m by default; flags win.
func TestStreamingTTLSetting(t *testing.T) {
	if d := Defaults().StreamingTTL; d != 15*time.Minute {
		t.Fatalf("default streaming TTL %s, want 15m", d)
	}
	dir := t.TempDir()
	writeConfig(t, dir, "streaming_ttl: 2s\n")
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.StreamingTTL != 2*time.Second {
		t.Fatalf("from the file: %s, want 2s", c.StreamingTTL)
	}
	c, err = Load([]string{"--home", dir, "--streaming-ttl", "1m"})
	if err != nil {
		t.Fatal(err)
	}
	if c.StreamingTTL != time.Minute {
		t.Fatalf("from the flag: %s, want 1m", c.StreamingTTL)
	}
	if _, err := Load([]string{"--home", dir, "--streaming-ttl", "-1s"}); err == nil {
		t.Fatal("a negative streaming TTL was accepted")
	}
}
