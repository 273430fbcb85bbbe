package config

import (
	"testing"
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
