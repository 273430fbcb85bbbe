package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/safefile"
)

// loadWithin runs Load and fails the test if it blocks.
func loadWithin(t *testing.T, args ...string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Load(args)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Load blocked on config.yaml")
		return nil
	}
}

// TestSpecialConfigFilesRefused: a config.yaml that is a FIFO, /dev/zero
// through a symlink, or larger than 1 MiB is a clear error at once, not
// a hang or a memory blow-up.
func TestSpecialConfigFilesRefused(t *testing.T) {
	t.Run("fifo", func(t *testing.T) {
		dir := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(dir, "config.yaml"), 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		err := loadWithin(t, "--home", dir)
		if !errors.Is(err, safefile.ErrNotRegular) || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("dev zero", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink("/dev/zero", filepath.Join(dir, "config.yaml")); err != nil {
			t.Fatal(err)
		}
		err := loadWithin(t, "--home", dir)
		if !errors.Is(err, safefile.ErrNotRegular) || !strings.Contains(err.Error(), "character device") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("oversize", func(t *testing.T) {
		dir := t.TempDir()
		big := "# " + strings.Repeat("x", MaxFileBytes) + "\naddr: 127.0.0.1:1\n"
		writeConfig(t, dir, big)
		err := loadWithin(t, "--home", dir)
		if !errors.Is(err, safefile.ErrTooLarge) || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("symlink to a regular file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "real.yaml"), []byte("ping-misses: 7\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("real.yaml", filepath.Join(dir, "config.yaml")); err != nil {
			t.Fatal(err)
		}
		c, err := Load([]string{"--home", dir})
		if err != nil || c.PingMisses != 7 {
			t.Fatalf("%v %d", err, c.PingMisses)
		}
	})
}

func TestToolEnv(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "tool-env: GOPATH, MY_VAR ,CARGO_HOME\n")
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.ToolEnv, " ") != "GOPATH MY_VAR CARGO_HOME" {
		t.Fatalf("tool env %q", c.ToolEnv)
	}
	c, err = Load([]string{"--home", dir, "--tool-env", "EDITOR"})
	if err != nil || strings.Join(c.ToolEnv, " ") != "EDITOR" {
		t.Fatalf("flag: %q %v", c.ToolEnv, err)
	}
	for _, bad := range []string{"OPENAI_API_KEY", "GITHUB_TOKEN", "METIS_HOME", "ANTHROPIC_BASE_URL", "A=B", "1X", "AWS_SECRET_ACCESS_KEY"} {
		writeConfig(t, dir, "tool-env: "+bad+"\n")
		if _, err := Load([]string{"--home", dir}); err == nil || !strings.Contains(err.Error(), "tool-env") {
			t.Errorf("tool-env %s: err %v", bad, err)
		}
		if _, err := Load([]string{"--home", t.TempDir(), "--tool-env", "PATH," + bad}); err == nil {
			t.Errorf("--tool-env %s accepted", bad)
		}
	}
}
