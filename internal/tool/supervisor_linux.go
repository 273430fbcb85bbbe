package tool

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The shell supervisor. On Linux a shell call does not run /bin/sh
// directly: it runs the metis binary itself (/proc/self/exe) under the
// name supervisorArg0, which init below recognises. That small process
// makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so every
// process the command starts stays its descendant whatever it does to
// leave the shell's process group or session (setsid, setpgrp, a double
// fork): an orphan is re-parented to the nearest subreaper, the
// supervisor, not to init. It runs /bin/sh -c COMMAND, and
//
//   - on SIGTERM (the call is cancelled or timed out) sends SIGTERM to
//     every descendant, then SIGKILL to every descendant after the grace
//     period;
//   - once the shell has exited, sends SIGKILL to every descendant left,
//     reaps each of them, and exits with the shell's exit code (or is
//     killed by SIGKILL if the shell died of a signal).
//
// So when the supervisor has exited, no process of the call is left, not
// even a zombie. The supervisor reaps with wait4(-1): that is safe there,
// as it is a process of its own with nothing else to wait for (in the
// server process a wait4(-1) would steal exit statuses from os/exec).

// shellProcessNote is what the shell tool's description promises about
// the command's processes.
const shellProcessNote = "Every process the command starts, in the background or detached (setsid, setpgrp, a double fork), is stopped when the command exits or the call is cancelled; nothing outlives the call."

// supervisorArg0 is argv[0] of a supervisor process: [arg0, grace, command].
const supervisorArg0 = "metis-shell-supervisor"

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// supervisorMargin is how long, past the grace period, the server waits
// for a stopped supervisor to exit before it kills it (and with it the
// guarantee for processes that escaped the group) as a last resort.
const supervisorMargin = 3 * time.Second

func init() {
	if len(os.Args) == 3 && os.Args[0] == supervisorArg0 {
		os.Exit(supervise(os.Args[1], os.Args[2]))
	}
}

// shellCommand returns the command that runs a shell call: the
// supervisor when this system has one.
func shellCommand(command string, grace time.Duration) (cmd *exec.Cmd, supervised bool) {
	if _, err := os.Stat("/proc/self/exe"); err != nil {
		return exec.Command("/bin/sh", "-c", command), false
	}
	return &exec.Cmd{Path: "/proc/self/exe", Args: []string{supervisorArg0, strconv.FormatInt(int64(grace), 10), command}}, true
}

// supervise is the supervisor's main; it returns the exit code.
func supervise(graceArg, command string) int {
	grace, err := strconv.ParseInt(graceArg, 10, 64)
	if err != nil || grace <= 0 {
		grace = int64(DefaultKillGrace)
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		// Without it, descendants that leave the group escape; the
		// process group is still killed.
		fmt.Fprintf(os.Stderr, "metis: cannot supervise background processes: %v\n", errno)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	// The shell stays in the supervisor's process group, so the server's
	// last resort (SIGKILL to the group) reaches it and what it left there.
	sh, err := os.StartProcess("/bin/sh", []string{"sh", "-c", command}, &os.ProcAttr{
		Env: os.Environ(), Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "metis: could not start /bin/sh: %v\n", err)
		return 127
	}
	type reaped struct {
		pid    int
		status syscall.WaitStatus
	}
	reapedCh := make(chan reaped, 16)
	go func() {
		defer close(reapedCh)
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil { // ECHILD: nothing left to wait for
				return
			}
			reapedCh <- reaped{pid, ws}
		}
	}()

	self := os.Getpid()
	var (
		shStatus syscall.WaitStatus
		shDone   bool
		killAt   <-chan time.Time
		sweepC   <-chan time.Time // SIGKILL sweeps, once killing has begun
	)
	sweep := time.NewTicker(10 * time.Millisecond)
	defer sweep.Stop()
	for {
		select {
		case r, ok := <-reapedCh:
			if !ok {
				if !shDone {
					return 127 // cannot happen: the shell is a child until reaped
				}
				if shStatus.Signaled() {
					// Die the same way the shell did, as far as the
					// server can tell: by a signal.
					_ = syscall.Kill(self, syscall.SIGKILL)
				}
				return shStatus.ExitStatus()
			}
			if r.pid == sh.Pid {
				shDone, shStatus = true, r.status
				// What the command left behind goes now; keep at it
				// until every descendant has been reaped (a process may
				// fork between two sweeps).
				signalDescendants(self, syscall.SIGKILL)
				sweepC = sweep.C
			}
		case <-stop:
			signalDescendants(self, syscall.SIGTERM)
			if killAt == nil {
				killAt = time.After(time.Duration(grace))
			}
		case <-killAt:
			signalDescendants(self, syscall.SIGKILL)
			sweepC = sweep.C
		case <-sweepC:
			signalDescendants(self, syscall.SIGKILL)
		}
	}
}

// signalDescendants sends sig to every descendant of pid, as /proc
// shows the process tree. A live descendant is never missed for good:
// one forked during the scan is found by the next sweep.
func signalDescendants(pid int, sig syscall.Signal) {
	for _, p := range descendants(pid) {
		_ = syscall.Kill(p, sig)
	}
}

// descendants returns the pids of every descendant of pid (parents
// before their children), read from /proc/*/stat. Without /proc it
// returns nothing: the server's SIGKILL to the process group is then all
// that is left.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
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

// parentOf reads the parent pid of p from /proc/p/stat.
func parentOf(p int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
	if err != nil {
		return 0, false // gone meanwhile
	}
	// pid (comm) state ppid …; comm may hold spaces and ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}
