package safefile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/safefile"
)

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(p, []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := safefile.ReadRegular(p, 100)
	if err != nil || string(b) != "a: 1\n" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := safefile.ReadRegular(filepath.Join(dir, "missing"), 100); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := safefile.ReadRegular(p, 4); !errors.Is(err, safefile.ErrTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	if err := os.Symlink("ok.yaml", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if b, err := safefile.ReadRegular(filepath.Join(dir, "link"), 100); err != nil || string(b) != "a: 1\n" {
		t.Fatalf("symlink to a regular file: %q %v", b, err)
	}
}

// TestReadRegularRefusesSpecialFiles: a FIFO (with no writer, which
// would block a plain open forever), /dev/zero through a symlink (which
// would never end) and a directory are refused at once.
func TestReadRegularRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, zero, dir} {
		done := make(chan error, 1)
		go func() {
			_, err := safefile.ReadRegular(p, safefile.DefaultLimit)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, safefile.ErrNotRegular) {
				t.Errorf("%s: %v, want ErrNotRegular", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadRegular blocked", p)
		}
	}
}
