package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

// crashChildEnv names the database the crash helper process writes to.
const crashChildEnv = "METIS_STORE_CRASH_CHILD_DB"

// TestCrashChild is not a test: run by TestCrashSafety as a child process,
// it appends events forever and prints "committed <id>" for each event
// once its done callback reports the commit.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("helper process of TestCrashSafety")
	}
	s, err := Open(context.Background(), Options{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	// Two submitters per session kind: one pipelining with Submit, one
	// waiting on Apply, so batches vary in size.
	for g := range 4 {
		go func() {
			m := newMaker(t, fmt.Sprintf("sess_%d", g))
			for {
				ev := m.next(types[m.n%len(types)])
				report := func(err error) {
					if err != nil {
						fmt.Fprintln(os.Stderr, "append:", err)
						os.Exit(3)
					}
					// os.Stdout is unbuffered: one write per line, after
					// the commit.
					fmt.Fprintf(os.Stdout, "committed %s %s\n", ev.SessionID, ev.ID)
				}
				if g%2 == 0 {
					s.Submit([]Op{AppendEvent{Event: ev}}, report)
				} else {
					report(s.Apply(context.Background(), AppendEvent{Event: ev}))
				}
			}
		}()
	}
	select {} // until killed
}

func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	killAfter := 20000 // committed events reported before the kill
	if raceEnabled {
		killAfter = 4000
	}
	path := filepath.Join(t.TempDir(), "trace.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	defer watchdog.Stop()

	committed := map[string][]string{} // session -> ids
	n := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "committed" {
			continue // test framework chatter
		}
		if _, err := event.ParseID(f[2]); err != nil {
			t.Fatalf("child printed a bad id: %q", sc.Text())
		}
		committed[f[1]] = append(committed[f[1]], f[2])
		n++
		if n == killAfter {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
		}
		// Lines already in the pipe when the child died are commits
		// too: keep reading to EOF.
	}
	err = cmd.Wait()
	if n < killAfter {
		t.Fatalf("child exited after %d commits: %v\n%s", n, err, stderr.String())
	}
	t.Logf("child killed after reporting %d commits (%v)", n, err)

	ctx := context.Background()
	s := openTest(t, Options{Path: path})
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	total := 0
	for sid, want := range committed {
		evs, err := s.Events(ctx, EventQuery{SessionIDs: []string{sid}})
		if err != nil {
			t.Fatal(err)
		}
		total += len(evs)
		stored := make(map[string]bool, len(evs))
		for _, ev := range evs {
			stored[ev.ID] = true
		}
		for _, id := range want {
			if !stored[id] {
				t.Fatalf("session %s: reported committed event %s is missing", sid, id)
			}
		}
	}
	t.Logf("%d events stored, all %d reported present", total, n)
	// The store is usable after the crash.
	ev := newMaker(t, "sess_after").next(event.TurnStarted)
	if err := s.Apply(ctx, AppendEvent{Event: ev}); err != nil {
		t.Fatal(err)
	}
}
