package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSandboxSettings: the sandbox is on by default, with no network
// and nothing more writable or hidden; config.yaml and the flags turn it
// off, allow the network and add paths (absolute or ~/), flags over the
// file.
func TestSandboxSettings(t *testing.T) {
	dir := t.TempDir()
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.SandboxOff || c.SandboxNetwork || c.SandboxWritable != nil || c.SandboxHidden != nil {
		t.Fatalf("defaults: off %v network %v writable %v hidden %v", c.SandboxOff, c.SandboxNetwork, c.SandboxWritable, c.SandboxHidden)
	}
	writeConfig(t, dir, "sandbox: false\nsandbox_network: on\nsandbox-writable: /opt/cache, ~/.cargo/registry\nsandbox-hidden: /srv/secrets\n")
	c, err = Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	if !c.SandboxOff || !c.SandboxNetwork || !slices.Equal(c.SandboxWritable, []string{"/opt/cache", filepath.Join(home, ".cargo/registry")}) || !slices.Equal(c.SandboxHidden, []string{"/srv/secrets"}) {
		t.Fatalf("from the file: %+v", c)
	}
	c, err = Load([]string{"--home", dir, "--sandbox=true", "--sandbox-network=false", "--sandbox-hidden", "/a,/b"})
	if err != nil {
		t.Fatal(err)
	}
	if c.SandboxOff || c.SandboxNetwork || !slices.Equal(c.SandboxHidden, []string{"/a", "/b"}) {
		t.Fatalf("flags over the file: %+v", c)
	}
}

// TestSandboxSettingErrors: a value that is not a boolean, or a path
// that is not absolute, refuses to start, naming the key.
func TestSandboxSettingErrors(t *testing.T) {
	for _, c := range []struct{ file, flag, want string }{
		{"sandbox: maybe\n", "", "sandbox"},
		{"sandbox-writable: relative/dir\n", "", "sandbox-writable"},
		{"", "--sandbox-hidden=./x", "sandbox-hidden"},
		{"", "--sandbox-network=2", "sandbox-network"},
	} {
		dir := t.TempDir()
		args := []string{"--home", dir}
		if c.file != "" {
			writeConfig(t, dir, c.file)
		}
		if c.flag != "" {
			args = append(args, c.flag)
		}
		if _, err := Load(args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %q: %v", c.file, c.flag, err)
		}
	}
}
