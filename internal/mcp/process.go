package mcp

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"time"

	"github.com/metis-agent/metis/internal/tool"
)

// stopGrace is how long a stdio server gets to exit after its stdin is
// closed, and again after SIGTERM, before its process group is killed.
const stopGrace = 2 * time.Second

// process is a running stdio server: the leader of its own process
// group, talking newline-delimited JSON-RPC over stdin and stdout, its
// stderr going to the log.
type process struct {
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File // our end: the server's stdin
	stdout *os.File // our end: the server's stdout
	stderr *stderrLog
	// exited is closed once the process has exited and been reaped, and
	// every other process of its group killed; status says how it ended.
	exited chan struct{}
	status string
}

// serverEnviron is a stdio server's environment: the tools' environment
// (the allow-list of tool.ToolEnviron with the tool-env setting's names,
// never a credential) and the variables its configuration names, which
// are passed as given.
func serverEnviron(environ, extra []string, env map[string]string) []string {
	out := tool.ToolEnviron(environ, extra)
	if len(env) == 0 {
		return out
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		kv := k + "=" + env[k]
		replaced := false
		for i, e := range out {
			if len(e) > len(k) && e[:len(k)+1] == k+"=" {
				out[i], replaced = kv, true
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}

// startProcess starts a stdio server in a process group of its own,
// with environ as its environment. Its stdin, stdout and stderr are
// pipes whose far ends it alone holds: nothing of exec copies them, so
// its exit is seen at once even while a child of it keeps a pipe open.
func startProcess(c ServerConfig, environ []string, log *slog.Logger) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd := exec.Command(c.Command, c.Args...)
	cmd.Env = environ
	cmd.Dir = c.Cwd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("start %s: %w", c.Command, err)
	}
	closeAll(inR, outW, errW) // the child's ends
	p := &process{cmd: cmd, pid: cmd.Process.Pid, stdin: inW, stdout: outR, exited: make(chan struct{})}
	p.stderr = newStderrLog(errR, log.With("pid", p.pid))
	go p.wait()
	return p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// wait reaps the server, kills what is left of its process group (the
// children of an npx or a shell wrapper), and closes exited.
func (p *process) wait() {
	err := p.cmd.Wait()
	killGroup(p.pid, syscall.SIGKILL)
	var ee *exec.ExitError
	switch {
	case err == nil:
		p.status = "exited with status 0"
	case errors.As(err, &ee):
		p.status = describeExit(ee)
	default:
		p.status = "ended: " + err.Error()
	}
	close(p.exited)
}

func describeExit(ee *exec.ExitError) string {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exited with status %d", ee.ExitCode())
}

// killGroup signals every process of the group led by pgid.
func killGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}

// stop ends the server as the MCP specification asks of a stdio client:
// it closes the server's stdin and waits stopGrace for it to exit, then
// sends SIGTERM to its process group and waits again, then SIGKILL. It
// returns once the process is reaped and the rest of its group killed,
// and closes our ends of the pipes.
func (p *process) stop() {
	_ = p.stdin.Close()
	if !p.waitExit(stopGrace) {
		killGroup(p.pid, syscall.SIGTERM)
		if !p.waitExit(stopGrace) {
			killGroup(p.pid, syscall.SIGKILL)
			<-p.exited
		}
	}
	_ = p.stdout.Close()
	p.stderr.close()
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}
