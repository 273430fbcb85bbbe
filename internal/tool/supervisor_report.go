package tool

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/metis-agent/metis/internal/sandbox"
)

// report is the server's end of a supervisor's report pipe: the
// supervisor writes the shell's exit status there ("exit N" or
// "signal N") once every process of the call is gone. No report means
// the supervisor did not get that far: it was killed.
type report struct {
	r, w *os.File
}

// newReport makes the pipe and hands its write end to cmd as
// descriptor 3.
func newReport(cmd *exec.Cmd) (*report, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("report pipe: %w", err)
	}
	cmd.ExtraFiles = []*os.File{w}
	return &report{r: r, w: w}, nil
}

// started closes this process's copy of the write end once the
// supervisor holds its own: the read end then sees EOF when the
// supervisor exits, however it exits.
func (p *report) started() {
	_ = p.w.Close()
}

// reported is what a supervisor reported: the shell's exit code (-1
// for a shell killed by a signal), and ok false when it reported
// nothing.
type reported struct {
	code int
	ok   bool
}

// watch reads the report in a goroutine of its own, which ends when the
// supervisor exits (the read end sees EOF then, report or not). A
// supervisor gone without a report was killed: what it supervised was
// re-parented to this process, and is swept at once (before the
// command's output, which those processes may hold open, is waited
// for). The result arrives on the channel.
func (p *report) watch() <-chan reported {
	ch := make(chan reported, 1)
	go func() {
		code, ok := p.read()
		if !ok {
			sandbox.SweepEscaped()
		}
		ch <- reported{code, ok}
	}()
	return ch
}

// read returns the exit code the supervisor reported once it has
// exited; ok is false when it reported nothing.
func (p *report) read() (code int, ok bool) {
	b, err := io.ReadAll(io.LimitReader(p.r, 64))
	if err != nil {
		return -1, false
	}
	var n int
	switch line := strings.TrimSpace(string(b)); {
	case sscan(line, "exit %d", &n):
		return n, true
	case sscan(line, "signal %d", &n):
		return -1, true
	}
	return -1, false
}

func sscan(s, format string, n *int) bool {
	_, err := fmt.Sscanf(s, format, n)
	return err == nil
}

func (p *report) close() {
	_ = p.r.Close()
	_ = p.w.Close()
}

// exitDescription says how the process of cmd ended.
func exitDescription(cmd *exec.Cmd) string {
	if cmd.ProcessState == nil {
		return "it did not exit"
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("signal %d, %s", int(ws.Signal()), ws.Signal())
	}
	return cmd.ProcessState.String()
}
