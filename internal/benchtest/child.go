package benchtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// A benchmark's client can run in a child process: the test binary
// re-executed, with -test.run=^$ so that it runs no test, and an
// environment variable that its package's init or TestMain checks
// before anything else runs, to become that client and exit. The
// benchmark's process then holds the server alone, and its CPU time is
// the server's.
//
// The protocol between the two is lines: the parent writes commands
// (if the client takes any) to the child's standard input, and closing
// it tells the child to end; the child answers on its standard output,
// one line per answer (Tell). The child's standard error is the
// parent's.

// Child is the parent's handle on a client process.
type Child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// StartChild re-executes this test binary as a child with env (each
// "KEY=VALUE") added to this process's environment.
func StartChild(env ...string) (*Child, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("child stdin: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("child stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start child: %w", err)
	}
	return &Child{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}, nil
}

// Send writes line and a newline to the child's standard input.
func (c *Child) Send(line []byte) error {
	if _, err := c.in.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write to child: %w", err)
	}
	return nil
}

// ReadLine reads the child's next line of output, without its newline.
func (c *Child) ReadLine() ([]byte, error) {
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("child output ended after %q: %w", line, err)
	}
	return bytes.TrimSuffix(line, []byte("\n")), nil
}

// Expect reads the child's next line and fails unless it is want.
func (c *Child) Expect(want string) error {
	line, err := c.ReadLine()
	if err != nil {
		return fmt.Errorf("want %q from the child: %w", want, err)
	}
	if got := string(bytes.TrimSpace(line)); got != want {
		return fmt.Errorf("want %q from the child, got %q", want, got)
	}
	return nil
}

// Close closes the child's standard input, which tells it to end, and
// waits for it to exit; it fails if the child exited with an error.
func (c *Child) Close() error {
	c.in.Close()
	if err := c.cmd.Wait(); err != nil {
		return fmt.Errorf("child: %w", err)
	}
	return nil
}

// Tell is the child's side of a line: it writes line and a newline to
// the parent (standard output).
func Tell(line string) { fmt.Println(line) }

// AwaitParent is the child's wait for the end: it returns once the
// parent closed the child's standard input (Child.Close).
func AwaitParent() { _, _ = io.Copy(io.Discard, os.Stdin) }
