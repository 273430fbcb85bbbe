package servertest

// A server in a child process: one a test can kill the hard way
// (SIGKILL: nothing flushed, no lease released, no connection drained)
// or pause (SIGSTOP), then start again on the same home.
//
// The child is the test binary itself. Its TestMain checks an
// environment variable of the package's own and, when it is set, builds
// the configuration it names and calls ServeChild instead of running
// the tests:
//
//	func TestMain(m *testing.M) {
//		if home := os.Getenv(serverEnv); home != "" {
//			cfg := config.Defaults()
//			cfg.Home, cfg.Addr = home, "127.0.0.1:0"
//			os.Exit(servertest.ServeChild(cfg))
//		}
//		...
//	}
//
// A test then calls StartChild with that variable and its value.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/server"
)

// ChildReadyTimeout bounds how long StartChild waits for the child's
// ready line: generous, for a loaded machine.
const ChildReadyTimeout = 60 * time.Second

// ServeChild runs a server on cfg, as given, until the process is
// interrupted or terminated (or killed): the ready line ("metis serving
// URL …") on stdout, the log, info and up, on stderr. It returns the
// process's exit code.
func ServeChild(cfg config.Config) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := server.New(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		return 1
	}
	if err := srv.Run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		return 1
	}
	return 0
}

// ChildOptions says how StartChild starts a child.
type ChildOptions struct {
	// Env and Value are the environment variable that makes the test
	// binary's TestMain call ServeChild, and its value (a home, a
	// configuration as JSON: whatever that TestMain reads).
	Env, Value string
	// Home is the server's home; its workspace is Home/workspace, made
	// if missing.
	Home string
	// LogName names the file under Home the child's stderr is appended
	// to.
	LogName string
	// Name names the child in failures and in its log's heading ("the
	// server process", "process node node-a").
	Name string
	// SysProcAttr, when not nil, is the child's.
	SysProcAttr *syscall.SysProcAttr
}

// Child is a server running in a child process. Its Harness has no
// Server (it is in the other process): Do, CreateSession and Submit
// work, WaitTurn and the recorder do not.
type Child struct {
	*Harness
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartChild starts the test binary again as a server (o.Env set) and
// waits up to ChildReadyTimeout for its ready line. The child is killed
// when the test ends, if it still runs; its log is shown when the test
// failed.
func StartChild(t testing.TB, o ChildOptions) *Child {
	t.Helper()
	ws := filepath.Join(o.Home, "workspace")
	Must(t, os.MkdirAll(ws, 0o755))
	logPath := filepath.Join(o.Home, o.LogName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	Must(t, err)
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), o.Env+"="+o.Value)
	cmd.Stderr = logFile
	cmd.SysProcAttr = o.SysProcAttr
	out, err := cmd.StdoutPipe()
	Must(t, err)
	Must(t, cmd.Start())
	c := &Child{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		defer close(c.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case ready <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("log of %s:\n%s", o.Name, b)
			}
		}
	})
	select {
	case line := <-ready:
		f := strings.Fields(line) // "metis serving http://127.0.0.1:PORT (home …"
		if len(f) < 3 || f[0] != "metis" || f[1] != "serving" {
			t.Fatalf("%s: unexpected ready line %q", o.Name, line)
		}
		c.Harness = &Harness{T: t, URL: f[2], Home: o.Home, Workspace: ws, HTTP: http.DefaultClient}
	case <-c.exited:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("%s exited before it was ready:\n%s", o.Name, b)
	case <-time.After(ChildReadyTimeout):
		t.Fatalf("%s printed no ready line within %s", o.Name, ChildReadyTimeout)
	}
	return c
}

// Kill kills the child (SIGKILL: nothing flushed, nothing released),
// a paused one too, and waits until it is gone.
func (c *Child) Kill() {
	_ = c.cmd.Process.Signal(syscall.SIGCONT)
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// Pause stops the child (SIGSTOP): every goroutine of it, its clock
// reads and its sockets' reads and writes stop until Resume, as in a
// long GC pause or a stopped VM. Its peers still see its connections
// open.
func (c *Child) Pause(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pause: %v", err)
	}
}

// Resume lets a paused child go on (SIGCONT).
func (c *Child) Resume(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("resume: %v", err)
	}
}
