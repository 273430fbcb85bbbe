package tool

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/metis-agent/metis/internal/sandbox"
)

// shellProc is one started shell command, foreground or background: the
// process (the supervisor on Linux), its report pipe, the server's end
// of its lifeline, and the command's $TMPDIR. start makes one; stop
// ends the command early; finish, called once the process has been
// waited for, makes sure nothing of it is left and cleans up.
type shellProc struct {
	cmd        *exec.Cmd
	pid        int // also the process group's id
	supervised bool
	grace      time.Duration
	tmp        string
	rep        *report
	reportCh   <-chan reported
	lifeline   *os.File // the write end; closing it tells the supervisor to stop
	untrack    func()
	waited     chan error // the process's Wait error, once
	started    time.Time
}

// start runs command as the shell tool does (supervisor, sandbox,
// environment, a $TMPDIR of its own), writing what it prints to stdout
// and stderr (one pipe when they are the same writer).
func (s Shell) start(env Env, command string, grace time.Duration, stdout, stderr io.Writer) (_ *shellProc, err error) {
	tmp, err := os.MkdirTemp("", "metis-call-")
	if err != nil {
		return nil, Errorf(ClassExecution, "could not create the call's temporary directory: %v", err)
	}
	p := &shellProc{grace: grace, tmp: tmp, untrack: func() {}}
	defer func() {
		if err != nil {
			p.cleanup()
		}
	}()
	policy := s.Sandbox.Call(env.Workspace, tmp, env.AllowNetwork)
	cmd, supervised := shellCommand(command, grace, policy)
	p.cmd, p.supervised = cmd, supervised
	cmd.Dir = env.Workspace
	cmd.Env = s.Sandbox.Environ(policy, s.environ(), tmp)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = grace
	var lifelineR *os.File
	if supervised {
		// Should the command kill its supervisor, what it started is
		// re-parented here, not to init, and swept.
		_ = sandbox.BecomeSubreaper()
		if p.rep, err = newReport(cmd); err != nil {
			return nil, Errorf(ClassExecution, "could not start the shell: %v", err)
		}
		// The lifeline: the supervisor stops the command when its read
		// end sees EOF, which happens when this process closes its end
		// or dies, however it dies (supervisor_linux.go).
		if lifelineR, p.lifeline, err = os.Pipe(); err != nil {
			return nil, Errorf(ClassExecution, "could not start the shell: lifeline: %v", err)
		}
		defer lifelineR.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, lifelineR)
	}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, Errorf(ClassExecution, "could not start the shell: %v", err)
	}
	p.pid = cmd.Process.Pid
	if supervised {
		p.rep.started()
		p.untrack = sandbox.TrackSupervisor(p.pid)
		p.reportCh = p.rep.watch()
	}
	p.waited = make(chan error, 1)
	go func() { p.waited <- cmd.Wait() }()
	return p, nil
}

// stop asks the command to end (SIGTERM to every process of it, SIGKILL
// after the grace period) and returns the process's Wait error.
func (p *shellProc) stop() error {
	if p.supervised {
		return stopSupervisor(p.pid, p.grace, p.waited)
	}
	return stopGroup(p.pid, p.grace, p.waited)
}

// finish is called once the process has been waited for (its Wait
// error is werr): whatever the command left in its group goes, the
// supervisor's report is read, and the call's resources are released.
// It returns the shell's exit code (-1 when unknown or killed by a
// signal) and whether the supervisor reported (always true unsupervised).
func (p *shellProc) finish() (code int, reportedOK bool) {
	// The command is done; whatever it left in its group goes too, before
	// the call is reported as ended. (The supervisor has already killed
	// every descendant, in the group or not, unless it had to be killed.)
	killGroup(p.pid)
	code, reportedOK = -1, true
	if p.cmd.ProcessState != nil {
		code = p.cmd.ProcessState.ExitCode()
	}
	if p.supervised {
		// The supervisor has exited, so the report is complete.
		r := <-p.reportCh
		code, reportedOK = r.code, r.ok
	}
	p.cleanup()
	return code, reportedOK
}

// cleanup releases what start took: the supervisor's registration, its
// pipes, the command's $TMPDIR.
func (p *shellProc) cleanup() {
	p.untrack()
	if p.rep != nil {
		p.rep.close()
	}
	if p.lifeline != nil {
		_ = p.lifeline.Close()
	}
	removeTree(p.tmp)
}

// killedSupervisor is the error of a call whose supervisor was killed
// before the command ended.
func (p *shellProc) killedSupervisor(output string) error {
	return Errorf(ClassExecution, "the shell's supervisor was killed (%s) before the command ended; every process of the call was stopped\n%s", exitDescription(p.cmd), output)
}
