//go:build linux

package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestShield: a process started with a key in its environment re-execs
// itself (same pid, same stdin and stdout), after which the kernel's
// copy of its environment (what /proc/<pid>/environ shows) holds only
// the visible variables, while Go's environment is the original one,
// marker removed; and it is no longer dumpable.
func TestShield(t *testing.T) {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{shieldChildArg0}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nowhere", "FAKE_API_KEY=sk-fake-shield-42", "OTHER=x"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("child said nothing: %v", err)
	}
	want := fmt.Sprintf("pid=%d dumpable=0 key=sk-fake-shield-42 marker=false err=<nil>\n", cmd.Process.Pid)
	if line != want {
		t.Fatalf("child: %q, want %q", line, want)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	switch {
	case err == nil:
		// Readable only with CAP_SYS_PTRACE (a root test): what it
		// shows is the visible part.
		if strings.Contains(string(b), "sk-fake-shield") || strings.Contains(string(b), "OTHER=") {
			t.Fatalf("the key is still in /proc/<pid>/environ: %q", b)
		}
		if !strings.Contains(string(b), "PATH=/usr/bin:/bin") {
			t.Fatalf("the visible variables are gone: %q", b)
		}
	case os.IsPermission(err):
		// Not dumpable: closed to an unprivileged test.
	default:
		t.Fatal(err)
	}
	// Still the same stdin and stdout.
	if _, err := io.WriteString(stdin, "hello\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := out.ReadString('\n'); err != nil || line != "read=hello\n" {
		t.Fatalf("after the re-exec: %q %v", line, err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestShieldNothingToHide: an environment holding nothing beyond the
// visible variables is not re-exec'd (no marker ever set).
func TestShieldNothingToHide(t *testing.T) {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{shieldChildArg0}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader("x\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("pid=%d dumpable=0 key= marker=false err=<nil>\nread=x\n", cmd.Process.Pid); string(out) != want {
		t.Fatalf("%q, want %q", out, want)
	}
}

// TestShieldRefusesAForeignMarker: a marker naming a descriptor that is
// not the environment's memfd is refused with an error (and the process
// goes on with its environment), never read as an environment.
func TestShieldRefusesAForeignMarker(t *testing.T) {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{shieldChildArg0}
	cmd.Env = []string{"PATH=/usr/bin:/bin", shieldEnv + "=0", "FAKE_API_KEY=k"}
	cmd.Stdin = strings.NewReader("x\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "key=k marker=false err="+shieldEnv+`="0" is not a descriptor`) {
		t.Fatalf("%q", out)
	}
}
