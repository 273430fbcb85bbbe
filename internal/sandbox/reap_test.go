//go:build linux

package sandbox

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSweepKillsOnlyAdoptedOrphans: an orphan re-parented to this
// process (a subreaper) is killed and reaped, with its own child; a
// child this process started, which os/exec will wait for, is left
// alone.
func TestSweepKillsOnlyAdoptedOrphans(t *testing.T) {
	if err := BecomeSubreaper(); err != nil {
		t.Skipf("not a subreaper: %v", err)
	}
	if !pidfdTracking() {
		t.Skip("the os package holds no pidfds here: the sweep is off")
	}
	mine := exec.Command("sleep", "300")
	if err := mine.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mine.Process.Kill(); _ = mine.Wait() })
	// sh starts an orphan-to-be (which starts a child of its own) and
	// exits: the orphan is re-parented here.
	out, err := exec.Command("/bin/sh", "-c", `sh -c 'sleep 300 & exec sleep 301' >/dev/null 2>&1 & echo $!`).Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p, ok := procStat(orphan); ok && p.ppid == syscall.Getpid() && len(Descendants(orphan)) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the orphan %d was not re-parented here with its child", orphan)
		}
		time.Sleep(5 * time.Millisecond)
	}
	grandchild := Descendants(orphan)[0]
	if n := SweepEscaped(); n < 1 {
		t.Fatalf("swept %d", n)
	}
	if !errors.Is(syscall.Kill(orphan, 0), syscall.ESRCH) {
		t.Errorf("the orphan %d is still there (even as a zombie)", orphan)
	}
	// The grandchild, killed too, is re-parented here and reaped by the
	// same sweep once it is an orphan.
	if err := syscall.Kill(grandchild, 0); !errors.Is(err, syscall.ESRCH) {
		if p, ok := procStat(grandchild); ok && p.ppid == syscall.Getpid() {
			t.Errorf("the orphan's child %d is still there", grandchild)
		}
	}
	if err := mine.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the started child was killed: %v", err)
	}
}

// TestFromShellCall: a descendant of a tracked supervisor is a shell
// call's process; this process and anything once the supervisor is
// untracked are not.
func TestFromShellCall(t *testing.T) {
	sup := exec.Command("/bin/sh", "-c", "sleep 300 & echo $!; wait")
	stdout, err := sup.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range Descendants(sup.Process.Pid) {
			_ = syscall.Kill(d, syscall.SIGKILL)
		}
		_ = sup.Process.Kill()
		_ = sup.Wait()
	})
	buf := make([]byte, 32)
	n, err := stdout.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatal(err)
	}
	if FromShellCall(child) {
		t.Fatal("a process counted as a shell call's before any call runs")
	}
	untrack := TrackSupervisor(sup.Process.Pid)
	if !FromShellCall(child) || !FromShellCall(sup.Process.Pid) {
		t.Error("the supervisor's descendant is not taken for a shell call's")
	}
	if FromShellCall(syscall.Getpid()) {
		t.Error("the server is taken for a shell call's process")
	}
	untrack()
	untrack() // idempotent
	if FromShellCall(child) {
		t.Error("still counted after the call ended")
	}
}
