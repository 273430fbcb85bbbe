//go:build unix

package tool_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/tool"
)

// TestSpecialFilesDoNotHang: opening a FIFO blocks until the other end
// opens it; a file tool must not hang on one (the model can make one
// with the shell tool), since Run must return promptly.
func TestSpecialFilesDoNotHang(t *testing.T) {
	ws, env := workspace(t)
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, c := range []struct {
		tl    tool.Tool
		input map[string]string
	}{
		{tool.ReadFile{}, map[string]string{"path": "fifo"}},
		{tool.WriteFile{}, map[string]string{"path": "fifo", "content": "x"}},
		{tool.ListDir{}, map[string]string{"path": "fifo"}},
	} {
		done := make(chan error, 1)
		go func() {
			b, _ := json.Marshal(c.input)
			_, err := c.tl.Run(context.Background(), env, b)
			done <- err
		}()
		select {
		case err := <-done:
			wantClass(t, err, tool.ClassInvalidInput)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s on a FIFO hung", c.tl.Spec().Name)
		}
	}
	if fi, err := os.Lstat(filepath.Join(ws, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo replaced: %v %v", fi, err)
	}
}
