//go:build linux

package sandbox

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// runStage runs sh -c script through the exec stage under p, in dir,
// and returns its combined output and exit code.
func runStage(t *testing.T, p Policy, dir, script string) (string, int) {
	t.Helper()
	path, args := StageCommand(p, []string{"/bin/sh", "-c", script})
	cmd := &exec.Cmd{Path: path, Args: args, Dir: dir, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// capHex returns the hexadecimal capability set named in a status line
// of /proc/self/status printed by the command.
func capSet(t *testing.T, status, name string) uint64 {
	t.Helper()
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in %q", name, status)
	return 0
}

// TestStageDropsProcessReachingCapabilities: without confinement the
// stage still drops the capabilities that reach other processes'
// memory and environment, from every set, so that not even a
// setuid-root program gets them back; the others stay (a root user who
// turned the sandbox off keeps the rest of root).
func TestStageDropsProcessReachingCapabilities(t *testing.T) {
	out, code := runStage(t, Policy{}, t.TempDir(), "cat /proc/self/status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var reach uint64
	for _, c := range reachCaps {
		reach |= 1 << c
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if got := capSet(t, out, set); got&reach != 0 {
			t.Errorf("%s still holds %#x", set, got&reach)
		}
	}
	if os.Geteuid() == 0 && capSet(t, out, "CapEff")&(1<<unix.CAP_DAC_OVERRIDE) == 0 {
		t.Error("an unconfined root command lost CAP_DAC_OVERRIDE")
	}
	if strings.Contains(out, "NoNewPrivs:\t1") {
		t.Error("an unconfined command got no_new_privs (sudo would stop working)")
	}
}

func needLandlock(t *testing.T) {
	t.Helper()
	if s := Probe(true); !s.Available {
		t.Skipf("the sandbox is unavailable here: %s", s.Reason)
	}
}

// TestStageConfines: a confined command keeps only the few capabilities
// of confinedCaps, runs with no_new_privs and a seccomp filter, writes
// its writable paths only, and cannot read a hidden one.
func TestStageConfines(t *testing.T) {
	needLandlock(t)
	root := tree(t, t.TempDir(), "ws/", "out/", "secret/key")
	ws := filepath.Join(root, "ws")
	p := Policy{Confine: true, Writable: []string{ws}, Hidden: []string{filepath.Join(root, "secret")}}
	out, code := runStage(t, p, ws, `cat /proc/self/status; echo x > inside && echo WROTE-INSIDE; echo x > ../out/f || echo REFUSED-OUTSIDE; cat ../secret/key || echo REFUSED-SECRET; ls .. >/dev/null && echo LISTED`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var keep uint64
	for _, c := range confinedCaps {
		keep |= 1 << c
	}
	if got := capSet(t, out, "CapBnd"); got&^keep != 0 {
		t.Errorf("bounding set holds %#x beyond the confined set", got&^keep)
	}
	for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2", "WROTE-INSIDE", "REFUSED-OUTSIDE", "REFUSED-SECRET", "LISTED"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s missing:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "out/f")); err == nil {
		t.Error("a file was written outside the writable paths")
	}
}

// TestStageNetwork: without the network a confined command cannot
// connect to a TCP port (not even over Multipath TCP); with it, it can.
func TestStageNetwork(t *testing.T) {
	needLandlock(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash (for /dev/tcp) not installed")
	}
	script := `bash -c 'echo hi > /dev/tcp/127.0.0.1/` + port + `' && echo CONNECTED`
	ws := t.TempDir()
	if out, _ := runStage(t, Policy{Confine: true, Writable: []string{ws}}, ws, script); strings.Contains(out, "CONNECTED") || !strings.Contains(out, "Permission denied") {
		t.Errorf("without the network: %s", out)
	}
	if out, _ := runStage(t, Policy{Confine: true, Writable: []string{ws}, Network: true}, ws, script); !strings.Contains(out, "CONNECTED") {
		t.Errorf("with the network: %s", out)
	}
	if py, err := exec.LookPath("python3"); err == nil {
		out, _ := runStage(t, Policy{Confine: true, Writable: []string{ws}}, ws, py+` -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)' 2>&1 || echo MPTCP-REFUSED`)
		if !strings.Contains(out, "MPTCP-REFUSED") {
			t.Errorf("a Multipath TCP socket was created: %s", out)
		}
	}
}

// TestStageFailsClosed: a policy the stage cannot read stops the
// command from running at all.
func TestStageFailsClosed(t *testing.T) {
	dir := t.TempDir()
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{stageArg0, "{not json", "/bin/sh", "-c", "touch ran"}, Dir: dir}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != StageExitCode || !strings.Contains(string(out), "metis: sandbox: policy") {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the command ran")
	}
}
