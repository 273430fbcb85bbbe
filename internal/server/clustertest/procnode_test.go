package clustertest_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/servertest"
)

// procNodeEnv, when set in the environment of the test binary, makes
// TestMain run one metis node instead of the tests: a node the tests
// can kill the hard way (SIGKILL), leases held and nothing released,
// or pause (SIGSTOP). Its value is the node's procNodeConfig as JSON.
const procNodeEnv = "METIS_CLUSTERTEST_NODE"

// procNodeConfig is what a process node is started with.
type procNodeConfig struct {
	NATS      string        `json:"nats"`
	Node      string        `json:"node"`
	Home      string        `json:"home"`
	LeaseTTL  time.Duration `json:"lease_ttl"`
	DemoDelay time.Duration `json:"demo_delay"`
}

// runProcNode serves the node procNodeEnv describes until it is killed
// or interrupted.
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
	return servertest.ServeChild(cfg)
}

// startProcNode starts a metis node in a child process on a home of its
// own, and waits for its ready line. The node is killed when the test
// ends, if it still runs; its log is shown when the test failed. Its
// Harness has URL, Home and Workspace, no Server.
func startProcNode(t testing.TB, natsURL, name string, leaseTTL, demoDelay time.Duration) *servertest.Child {
	t.Helper()
	return startProcNodeAt(t, natsURL, name, t.TempDir(), leaseTTL, demoDelay)
}

// startProcNodeAt is startProcNode on a given home: a node restarted
// after a crash.
func startProcNodeAt(t testing.TB, natsURL, name, home string, leaseTTL, demoDelay time.Duration) *servertest.Child {
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
	return servertest.StartChild(t, servertest.ChildOptions{Env: procNodeEnv, Value: string(pc), Home: home,
		LogName: "node.log", Name: "process node " + name, SysProcAttr: childProcAttr()})
}
