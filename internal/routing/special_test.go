package routing

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/safefile"
)

// replaceWith puts a FIFO, a symlink to /dev/zero or an oversize file at
// path. Each is made aside and renamed over path, so the poller never
// sees the path missing or half written.
func replaceWith(t *testing.T, path, kind string) {
	t.Helper()
	tmp := path + ".tmp"
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(tmp, 0o600)
	case "dev zero":
		err = os.Symlink("/dev/zero", tmp)
	case "oversize":
		err = os.WriteFile(tmp, []byte("default: builtin:demo\n# "+strings.Repeat("x", MaxPolicyBytes)+"\n"), 0o600)
	case "good":
		err = os.WriteFile(tmp, []byte("default: builtin:demo\n"), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		t.Skipf("%s: %v", kind, err)
	}
}

var specialKinds = []struct{ kind, want string }{
	{"fifo", "FIFO"}, {"dev zero", "character device"}, {"oversize", "limit"},
}

// TestSpecialPolicyFileAtStart: a routing.yaml that is a FIFO, /dev/zero
// or oversize is refused at once when the engine starts.
func TestSpecialPolicyFileAtStart(t *testing.T) {
	for _, k := range specialKinds {
		t.Run(k.kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "routing.yaml")
			replaceWith(t, path, k.kind)
			done := make(chan error, 1)
			go func() {
				_, err := NewEngine(path, nil, nil)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), k.want) {
					t.Fatalf("err %v, want one saying %q", err, k.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("NewEngine blocked")
			}
		})
	}
}

// TestWatchSurvivesSpecialPolicyFiles: the poller reports each special
// file once, keeps the previous policy, never blocks (its context still
// stops it), and takes a good file again afterwards.
func TestWatchSurvivesSpecialPolicyFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "routing.yaml")
	write(t, path, "default: openai:gpt-4.1\n")
	changes := make(chan Change, 16)
	e, err := NewEngine(path, nil, func(c Change) { changes <- c })
	if err != nil {
		t.Fatal(err)
	}
	v0 := e.Version()
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { e.Watch(ctx, 5*time.Millisecond); close(watched) }()
	next := func() Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no change reported")
			return Change{}
		}
	}
	for _, k := range specialKinds {
		replaceWith(t, path, k.kind)
		c := next()
		if c.Err == nil || !strings.Contains(c.Err.Error(), k.want) || !errors.Is(c.Err, safefile.ErrNotRegular) && !errors.Is(c.Err, safefile.ErrTooLarge) {
			t.Fatalf("%s: change %+v", k.kind, c)
		}
		if e.Version() != v0 || e.Decide(Input{UserText: "x"}).Model != "openai:gpt-4.1" {
			t.Fatalf("%s replaced the policy", k.kind)
		}
	}
	replaceWith(t, path, "good")
	if c := next(); c.Err != nil || c.Version <= v0 || e.Decide(Input{UserText: "x"}).Model != "builtin:demo" {
		t.Fatalf("good file after special ones: %+v", c)
	}
	// A FIFO again, then stop: Watch returns (and never sat in an open).
	replaceWith(t, path, "fifo")
	next()
	cancel()
	select {
	case <-watched:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
}
