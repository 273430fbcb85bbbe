package clustertest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/servertest"
)

// procNodeEnv, when set in the environment of the test binary, makes
// TestMain run one metis node instead of the tests: a node the tests
// can kill the hard way (SIGKILL), leases held and nothing released.
// Its value is the node's procNodeConfig as JSON.
const procNodeEnv = "METIS_CLUSTERTEST_NODE"

// procNodeConfig is what a process node is started with.
type procNodeConfig struct {
	NATS      string        `json:"nats"`
	Node      string        `json:"node"`
	Home      string        `json:"home"`
	LeaseTTL  time.Duration `json:"lease_ttl"`
	DemoDelay time.Duration `json:"demo_delay"`
}

// runProcNode serves one metis node until it is killed or interrupted:
// the ready line on stdout, the log on stderr.
func runProcNode() int {
	var pc procNodeConfig
	if err := json.Unmarshal([]byte(os.Getenv(procNodeEnv)), &pc); err != nil {
		fmt.Fprintln(os.Stderr, "procnode:", err)
		return 2
	}
	cfg := config.Defaults()
	cfg.Home, cfg.Addr, cfg.NATS, cfg.Node = pc.Home, "127.0.0.1:0", pc.NATS, pc.Node
	cfg.LeaseTTL, cfg.DemoDelay = pc.LeaseTTL, pc.DemoDelay
	cfg.DefaultMode, cfg.ShellSandbox = permission.ModeAuto, permission.SandboxDisabled // as servertest.Start
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := server.New(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "procnode:", err)
		return 1
	}
	if err := srv.Run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "procnode:", err)
		return 1
	}
	return 0
}

// procNode is a metis node running in a child process.
type procNode struct {
	*servertest.Harness // URL, Workspace, Do, CreateSession, Submit (no Server)
	cmd                 *exec.Cmd
	exited              chan struct{}
	logPath             string
}

// startProcNode starts a metis node in a child process (the test binary
// again, procNodeEnv set) on a home of its own, and waits for its ready
// line. The node is killed when the test ends, if it still runs; its
// log is shown when the test failed.
func startProcNode(t testing.TB, natsURL, name string, leaseTTL, demoDelay time.Duration) *procNode {
	t.Helper()
	return startProcNodeAt(t, natsURL, name, t.TempDir(), leaseTTL, demoDelay)
}

// startProcNodeAt is startProcNode on a given home: a node restarted
// after a crash.
func startProcNodeAt(t testing.TB, natsURL, name, home string, leaseTTL, demoDelay time.Duration) *procNode {
	t.Helper()
	ws := filepath.Join(home, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte("content of README.md\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pc, err := json.Marshal(procNodeConfig{NATS: natsURL, Node: name, Home: home, LeaseTTL: leaseTTL, DemoDelay: demoDelay})
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(home, "node.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), procNodeEnv+"="+string(pc))
	cmd.Stderr = logFile
	cmd.SysProcAttr = childProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pn := &procNode{cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	ready := make(chan string, 1)
	go func() {
		defer close(pn.exited)
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
		pn.Kill()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("log of process node %s:\n%s", name, b)
			}
		}
	})
	select {
	case line := <-ready:
		// "metis serving http://127.0.0.1:PORT (home …"
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "metis" || f[1] != "serving" {
			t.Fatalf("process node %s: unexpected ready line %q", name, line)
		}
		pn.Harness = &servertest.Harness{T: t, URL: f[2], Home: home, Workspace: ws}
	case <-pn.exited:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("process node %s exited before it was ready:\n%s", name, b)
	case <-time.After(60 * time.Second):
		t.Fatalf("process node %s: no ready line", name)
	}
	return pn
}

// Kill kills the node's process (SIGKILL: nothing is released, no
// lease, no connection drained) and waits until it is gone.
func (pn *procNode) Kill() {
	_ = pn.cmd.Process.Signal(syscall.SIGCONT) // a paused node too
	_ = pn.cmd.Process.Kill()
	<-pn.exited
}

// Pause stops the node's process (SIGSTOP): every goroutine of it,
// its clock reads and its sockets' reads and writes stop until Resume,
// as in a long GC pause or a stopped VM. Its NATS server still sees
// the connection open and still routes the node's subscriptions to it.
func (pn *procNode) Pause(t testing.TB) {
	t.Helper()
	if err := pn.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pause: %v", err)
	}
}

// Resume lets a paused node go on (SIGCONT).
func (pn *procNode) Resume(t testing.TB) {
	t.Helper()
	if err := pn.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("resume: %v", err)
	}
}
