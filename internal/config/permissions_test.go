package config

import (
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/permission"
)

// TestPermissionsKeys: default-mode, approval-timeout and the
// permissions rules from config.yaml, with their defaults.
func TestPermissionsKeys(t *testing.T) {
	dir := t.TempDir()
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.DefaultMode != permission.ModeDefault || c.ApprovalTimeout != 5*time.Minute {
		t.Fatalf("defaults: mode %q, approval timeout %v", c.DefaultMode, c.ApprovalTimeout)
	}
	writeConfig(t, dir, `default_mode: accept_edits
approval-timeout: 90s
permissions:
  allow: ["shell(go test *)", "write_file(docs/**)"]
  ask: ["shell(git push *)"]
  deny: ["shell(rm -rf *)"]
`)
	if c, err = Load([]string{"--home", dir}); err != nil {
		t.Fatal(err)
	}
	rs := c.Permissions
	if c.DefaultMode != permission.ModeAcceptEdits || c.ApprovalTimeout != 90*time.Second ||
		len(rs.Allow) != 2 || len(rs.Ask) != 1 || len(rs.Deny) != 1 || rs.Deny[0].Text != "shell(rm -rf *)" {
		t.Fatalf("from the file: mode %q, timeout %v, rules %+v", c.DefaultMode, c.ApprovalTimeout, rs)
	}
	if c, err = Load([]string{"--home", dir, "--default-mode", "auto"}); err != nil || c.DefaultMode != permission.ModeAuto {
		t.Fatalf("the flag wins: %q (%v)", c.DefaultMode, err)
	}
}

// TestPermissionsRefused: a rule that does not parse refuses the start
// and is named; so is an unknown mode, a timeout under a second, and an
// unknown key under permissions.
func TestPermissionsRefused(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"permissions:\n  deny: [\"shell(rm -rf *\"]\n", `"shell(rm -rf *" (deny)`},
		{"permissions:\n  allow: [\"write_file(/etc/**)\"]\n", `"write_file(/etc/**)" (allow)`},
		{"permissions:\n  always: [\"shell\"]\n", "always"},
		{"default-mode: yolo\n", `"yolo" is not a mode`},
		{"approval-timeout: 10ms\n", "at least 1s"},
	} {
		dir := t.TempDir()
		writeConfig(t, dir, tc.file)
		_, err := Load([]string{"--home", dir})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error naming %s", tc.file, err, tc.want)
		}
	}
	if _, err := Load([]string{"--home", t.TempDir(), "--default-mode", "nope"}); err == nil {
		t.Error("--default-mode nope accepted")
	}
}
