package tool

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/metis-agent/metis/internal/sandbox"
)

// The shell supervisor. On Linux a shell call does not run /bin/sh
// directly: it runs the metis binary itself (/proc/self/exe) under the
// name supervisorArg0, which init below recognises. That small process
// makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so every
// process the command starts stays its descendant whatever it does to
// leave the shell's process group or session (setsid, setpgrp, a double
// fork): an orphan is re-parented to the nearest subreaper, the
// supervisor, not to init. It runs /bin/sh -c COMMAND through the
// sandbox's exec stage (internal/sandbox), which drops capabilities and
// enters the call's Landlock domain before it execs the shell: the
// supervisor itself stays outside, where a confined command cannot
// signal it. It
//
//   - on SIGTERM (the call is cancelled or timed out) sends SIGTERM to
//     every descendant, then SIGKILL to every descendant after the grace
//     period;
//   - does the same when its lifeline (descriptor 4, a pipe whose write
//     end only the server holds) sees EOF: the server closed it, or died
//     (a crash, SIGKILL), so no command outlives the server;
//   - once the shell has exited, sends SIGKILL to every descendant left,
//     reaps each of them, writes the shell's exit status to its report
//     pipe (descriptor 3) and exits.
//
// So when the supervisor has exited, no process of the call is left, not
// even a zombie. The supervisor reaps with wait4(-1): that is safe there,
// as it is a process of its own with nothing else to wait for (in the
// server process a wait4(-1) would steal exit statuses from os/exec).
//
// A supervisor that exits without a report was killed (by the command
// itself, when nothing stopped it from signalling its parent): what it
// supervised was re-parented to the server, a subreaper too, which
// kills it (sandbox.SweepEscaped), and the call fails.

// shellProcessNote is what the shell tool's description promises about
// the command's processes.
const shellProcessNote = "Every process the command starts, in the background or detached (setsid, setpgrp, a double fork), is stopped when the command exits or the call is cancelled; nothing outlives the call."

// supervisorArg0 is argv[0] of a supervisor process: [arg0, grace,
// policy, command], the policy encoded for the exec stage.
const supervisorArg0 = "metis-shell-supervisor"

// reportFD is the supervisor's end of its report pipe, lifelineFD the
// read end of its lifeline: the server holds the write end while the
// call runs, so EOF there means the server closed it or died.
const (
	reportFD   = 3
	lifelineFD = 4
)

// supervisorMargin is how long, past the grace period, the server waits
// for a stopped supervisor to exit before it kills it (and with it the
// guarantee for processes that escaped the group) as a last resort.
const supervisorMargin = 3 * time.Second

func init() {
	if len(os.Args) == 4 && os.Args[0] == supervisorArg0 {
		os.Exit(supervise(os.Args[1], os.Args[2], os.Args[3]))
	}
}

// shellCommand returns the command that runs a shell call under policy:
// the supervisor when this system has one, with the write end of its
// report pipe as its descriptor 3 (ExtraFiles).
func shellCommand(command string, grace time.Duration, policy sandbox.Policy) (cmd *exec.Cmd, supervised bool) {
	if _, err := os.Stat("/proc/self/exe"); err != nil {
		return exec.Command("/bin/sh", "-c", command), false
	}
	return &exec.Cmd{Path: "/proc/self/exe", Args: []string{supervisorArg0, strconv.FormatInt(int64(grace), 10), policy.Encode(), command}}, true
}

// supervise is the supervisor's main; it returns the exit code.
func supervise(graceArg, policy, command string) int {
	grace, err := strconv.ParseInt(graceArg, 10, 64)
	if err != nil || grace <= 0 {
		grace = int64(DefaultKillGrace)
	}
	// The report pipe is the supervisor's alone: the command must not
	// write a report of its own.
	syscall.CloseOnExec(reportFD)
	report := os.NewFile(reportFD, "report")
	syscall.CloseOnExec(lifelineFD)
	orphaned := watchLifeline()
	// Nothing of the supervisor is for the command to read or trace.
	_ = sandbox.Harden()
	if err := sandbox.BecomeSubreaper(); err != nil {
		// Without it, descendants that leave the group escape; the
		// process group is still killed.
		fmt.Fprintf(os.Stderr, "metis: cannot supervise background processes: %v\n", err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	// The shell stays in the supervisor's process group, so the server's
	// last resort (SIGKILL to the group) reaches it and what it left there.
	path, argv := sandbox.StageCommandEncoded(policy, []string{"/bin/sh", "-c", command})
	sh, err := os.StartProcess(path, argv, &os.ProcAttr{
		Env: os.Environ(), Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "metis: could not start /bin/sh: %v\n", err)
		fmt.Fprintf(report, "exit 127\n")
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
					fmt.Fprintf(report, "signal %d\n", int(shStatus.Signal()))
					return 128 + int(shStatus.Signal())
				}
				fmt.Fprintf(report, "exit %d\n", shStatus.ExitStatus())
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
		case <-orphaned:
			// The server is gone (it crashed, or was killed): nothing
			// of the call may outlive it.
			orphaned = nil
			signalDescendants(self, syscall.SIGTERM)
			if killAt == nil {
				killAt = time.After(time.Duration(grace))
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

// watchLifeline returns a channel closed once the lifeline (descriptor
// lifelineFD) sees EOF: the server has closed its end or died. Without a
// lifeline (not a pipe) the channel never closes.
func watchLifeline() <-chan struct{} {
	ch := make(chan struct{})
	var st syscall.Stat_t
	if syscall.Fstat(lifelineFD, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return ch
	}
	f := os.NewFile(lifelineFD, "lifeline")
	go func() {
		var b [1]byte
		for {
			if _, err := f.Read(b[:]); err != nil {
				close(ch)
				return
			}
		}
	}()
	return ch
}

// signalDescendants sends sig to every descendant of pid, as /proc
// shows the process tree. A live descendant is never missed for good:
// one forked during the scan is found by the next sweep.
func signalDescendants(pid int, sig syscall.Signal) {
	for _, p := range sandbox.Descendants(pid) {
		_ = syscall.Kill(p, sig)
	}
}
