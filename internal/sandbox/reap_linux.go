package sandbox

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Escaped processes. The shell's supervisor is a child subreaper: what a
// command starts stays below it. A command that kills its supervisor
// (possible without the sandbox, or below Landlock ABI 6) would leave
// its processes to init. So the server is a subreaper too: they are
// re-parented to it instead, and it kills and reaps them.
//
// The server must never wait4(-1): that would steal the exit status of
// a process os/exec started. It tells the two apart by the pidfd the os
// package holds for every process it starts (clone with CLONE_PIDFD,
// since Go 1.23), from the start until Wait: a child of the server that
// no pidfd of the server refers to was not started by it, so it is an
// orphan it adopted, and it is killed (with its descendants) and reaped
// by its pid. The pidfd exists as soon as the child does, so a child
// just started is never taken for an orphan. If this Go does not hold
// pidfds (pidfd support missing in the kernel), the sweep kills nothing.

var (
	subreaperOnce sync.Once
	subreaperErr  error
	sweepMu       sync.Mutex
	trackOnce     sync.Once
	tracking      bool
)

// BecomeSubreaper makes this process a child subreaper (once), so the
// orphans of its descendants are re-parented to it, not to init.
func BecomeSubreaper() error {
	subreaperOnce.Do(func() {
		subreaperErr = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	})
	return subreaperErr
}

// pidfdTracking reports whether the os package holds a pidfd for the
// processes it starts: it starts one and looks.
func pidfdTracking() bool {
	trackOnce.Do(func() {
		p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", "exit 0"}, &os.ProcAttr{})
		if err != nil {
			return
		}
		_, tracking = startedChildren()[p.Pid]
		_, _ = p.Wait()
	})
	return tracking
}

// SweepEscaped kills and reaps every child of this process that it did
// not start (an orphan re-parented to it as a subreaper), with all the
// processes below it, until none is left or a few seconds have passed.
// It returns how many it reaped. Safe to call from several goroutines.
func SweepEscaped() int {
	if !pidfdTracking() {
		return 0
	}
	sweepMu.Lock()
	defer sweepMu.Unlock()
	self := os.Getpid()
	reaped := 0
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		kids := childrenOf(self)
		if len(kids) == 0 {
			return reaped
		}
		started := startedChildren()
		var orphans []proc
		for _, k := range kids {
			if _, ok := started[k.pid]; !ok {
				orphans = append(orphans, k)
			}
		}
		if len(orphans) == 0 {
			return reaped
		}
		for _, o := range orphans {
			for _, d := range Descendants(o.pid) {
				_ = syscall.Kill(d, syscall.SIGKILL)
			}
			// Still the same process, still an orphan of ours: only this
			// sweep reaps such a process, so its pid cannot have been
			// reused meanwhile, unless it was a started child os/exec
			// reaped between the two listings; the start time tells.
			if p, ok := procStat(o.pid); !ok || p.ppid != self || p.start != o.start {
				continue
			}
			_ = syscall.Kill(o.pid, syscall.SIGKILL)
			if reap(o.pid, deadline) {
				reaped++
			}
		}
	}
	return reaped
}

// reap waits for the killed child pid (bounded by deadline: a process in
// uninterruptible sleep dies late; the next sweep reaps it).
func reap(pid int, deadline time.Time) bool {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return false
		case got == pid:
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// WatchEscaped sweeps escaped processes whenever a child of this
// process changes state (SIGCHLD), at most every 50 ms, until ctx is
// done. The server runs it, so that an orphan it adopted is killed at
// once and no zombie accumulates.
func WatchEscaped(ctx context.Context) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	defer signal.Stop(ch)
	t := time.NewTicker(time.Minute) // and now and then, in case
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-t.C:
		}
		SweepEscaped()
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// proc is a process as /proc/<pid>/stat shows it.
type proc struct {
	pid, ppid int
	start     uint64 // start time, clock ticks after boot
}

// procStat reads /proc/<pid>/stat.
func procStat(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid … starttime is field 22; comm may hold
	// spaces and ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return proc{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, start: start}, true
}

// allProcs lists every process /proc shows.
func allProcs() []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := procStat(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// childrenOf returns the children of pid.
func childrenOf(pid int) []proc {
	var out []proc
	for _, p := range allProcs() {
		if p.ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// Descendants returns the pids of every descendant of pid (parents
// before their children), as /proc shows the process tree.
func Descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range allProcs() {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// startedChildren returns the pids this process holds a pidfd for (the
// processes the os package started and has not waited for yet), read
// from /proc/self/fdinfo.
func startedChildren() map[int]struct{} {
	out := map[int]struct{}{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return out
	}
	for _, e := range ents {
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.Contains(link, "pidfd") {
			continue
		}
		b, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Pid:"); ok {
				if pid, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && pid > 0 {
					out[pid] = struct{}{}
				}
			}
		}
	}
	return out
}

// parentPid returns the parent of pid.
func parentPid(pid int) (int, bool) {
	p, ok := procStat(pid)
	return p.ppid, ok
}
