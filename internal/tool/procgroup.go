package tool

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// groupGoneWait bounds how long a shell call waits, after SIGKILL, for
// the processes of its group to be gone.
const groupGoneWait = 2 * time.Second

// killGroup sends SIGKILL to every process of the group and waits
// (bounded by groupGoneWait) until none of them is still running, so
// that a call reported as ended has no process left behind. Signals are
// delivered asynchronously: without the wait, a background process
// could still be running for a moment after the call returns.
func killGroup(pgid int) {
	if syscall.Kill(-pgid, syscall.SIGKILL) != nil {
		return // no process left in the group
	}
	deadline := time.Now().Add(groupGoneWait)
	for groupRunning(pgid) && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// groupRunning reports whether a process of the group is still running:
// a zombie (dead, waiting for a parent that may never reap it, as in a
// container without an init) does not count. Without /proc it assumes
// the group is gone once signal 0 finds no process.
func groupRunning(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	want := strconv.Itoa(pgid)
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and ")".
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}
