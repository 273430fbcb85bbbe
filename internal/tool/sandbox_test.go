//go:build linux

package tool_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/sandbox"
	"github.com/metis-agent/metis/internal/tool"
)

// The sandbox, tested as an attacker would use the shell tool: each
// test runs the commands a prompt injection would, and checks that they
// were refused or contained (docs/sandbox.md).

func needSandbox(t *testing.T) {
	t.Helper()
	if s := sandbox.Probe(true); !s.Available {
		t.Skipf("the sandbox is unavailable on this kernel: %s", s.Reason)
	}
}

// fixture is a workspace, a directory outside it, and a metis home with
// a token, a database and a config file holding a key, hidden from the
// commands as the server hides its home.
type fixture struct {
	sh      tool.Shell
	env     tool.Env
	root    string
	outside string
	home    string
}

const fakeKey = "sk-fake-sandbox-key-7f3a"

func newFixture(t *testing.T) fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{root: root, outside: filepath.Join(root, "outside"), home: filepath.Join(root, "home")}
	mustWrite(t, filepath.Join(f.outside, "keep.txt"), "keep")
	mustWrite(t, filepath.Join(f.home, "token"), "metis-token-"+fakeKey)
	mustWrite(t, filepath.Join(f.home, "metis.db"), "SQLite format 3 "+fakeKey)
	mustWrite(t, filepath.Join(f.home, "config.yaml"), "providers:\n  openai:\n    api_key: "+fakeKey+"\n")
	ws := filepath.Join(root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	f.env = newEnv(t, ws)
	f.sh = tool.Shell{Grace: 300 * time.Millisecond, Sandbox: sandbox.Settings{Hidden: []string{f.home}, CacheDir: filepath.Join(root, "cache")}}
	return f
}

func (f fixture) run(t *testing.T, cmd string) string {
	t.Helper()
	res, err := f.sh.Run(context.Background(), f.env, shellIn(cmd, 60))
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return res.Content
}

// TestSandboxRefusesWritesOutsideTheWorkspace: by absolute path, by
// "..", through a symlink in the workspace, after cd /, into /tmp, and
// by removing or moving a file outside: every one is refused, and the
// directory outside is as it was.
func TestSandboxRefusesWritesOutsideTheWorkspace(t *testing.T) {
	needSandbox(t)
	f := newFixture(t)
	before := snapshot(t, f.outside)
	rel := strings.TrimPrefix(f.outside, "/")
	tmpProbe := filepath.Join(os.TempDir(), "metis-sandbox-probe-"+strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { os.Remove(tmpProbe) })
	for _, c := range []struct{ name, cmd string }{
		{"absolute path", "echo x > " + f.outside + "/abs.txt"},
		{"dot dot", "echo x > ../outside/dotdot.txt"},
		{"symlink in the workspace", "ln -s " + f.outside + " out && echo x > out/link.txt"},
		{"cd /", "cd / && echo x > " + rel + "/root.txt"},
		{"overwrite", "echo changed > " + f.outside + "/keep.txt"},
		{"remove", "rm -f " + f.outside + "/keep.txt"},
		{"move out", "mv " + f.outside + "/keep.txt ."},
		{"mkdir", "mkdir " + f.outside + "/d"},
		{"/tmp", "echo x > " + tmpProbe},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := f.run(t, c.cmd+"; echo rc=$?")
			if strings.Contains(out, "rc=0") || !strings.Contains(strings.ToLower(out), "denied") {
				t.Errorf("not refused:\n%s", out)
			}
		})
	}
	diffSnapshots(t, "outside", before, snapshot(t, f.outside))
	if _, err := os.Stat(tmpProbe); err == nil {
		t.Error("a file was written in /tmp")
	}
	// The workspace itself stays writable, and so does $TMPDIR.
	if out := f.run(t, `echo x > in.txt && mkdir -p a/b && mv in.txt a/b/ && echo y > "$TMPDIR/t" && echo ALL-OK`); !strings.Contains(out, "ALL-OK") {
		t.Errorf("ordinary writes refused:\n%s", out)
	}
}

// TestSandboxHidesTheMetisHome: the token, the database and the config
// file with the keys cannot be read, copied or searched.
func TestSandboxHidesTheMetisHome(t *testing.T) {
	needSandbox(t)
	f := newFixture(t)
	out := f.run(t, "cat "+f.home+"/token; cat "+f.home+"/metis.db; cat "+f.home+"/config.yaml; cp "+f.home+"/token stolen; grep -r sk- "+f.home+"; tar cf - "+f.home+" | strings; cd "+f.home+" && cat ./token; true")
	if strings.Contains(out, fakeKey) {
		t.Fatalf("a secret of the home was read:\n%s", out)
	}
	if strings.Count(out, "Permission denied") < 4 {
		t.Errorf("refusals missing:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(f.env.Workspace, "stolen")); err == nil && len(b) > 0 {
		t.Fatalf("the token was copied: %q", b)
	}
}

// TestSandboxRefusesTCP: curl, nc, bash's /dev/tcp and python cannot
// reach a loopback port the test listens on; a call allowed the network
// (tool.Env.AllowNetwork) can.
func TestSandboxRefusesTCP(t *testing.T) {
	needSandbox(t)
	f := newFixture(t)
	port, accepted := countingListener(t)
	attempts := map[string]string{
		"bash":    "bash -c 'echo hi > /dev/tcp/127.0.0.1/" + port + "'",
		"curl":    "curl -sS -m 5 http://127.0.0.1:" + port + "/",
		"nc":      "nc -w 2 127.0.0.1 " + port + " </dev/null",
		"python3": "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", " + port + "), 5)'",
		"node":    "node -e 'require(\"net\").connect(" + port + ", \"127.0.0.1\").on(\"error\", e => { console.error(e.code); process.exit(1) })'",
	}
	tried := 0
	for prog, cmd := range attempts {
		if _, err := exec.LookPath(prog); err != nil {
			continue
		}
		tried++
		out := f.run(t, cmd+"; echo rc=$?")
		if strings.Contains(out, "rc=0\n") {
			t.Errorf("%s connected:\n%s", prog, out)
		}
	}
	if tried == 0 {
		t.Skip("none of bash, curl, nc, python3, node is installed")
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the listener accepted %d connections from the sandbox", n)
	}
	if _, err := exec.LookPath("bash"); err == nil {
		env := f.env
		env.AllowNetwork = true
		res, err := f.sh.Run(context.Background(), env, shellIn(attempts["bash"]+" && echo CONNECTED", 30))
		if err != nil || !strings.Contains(res.Content, "CONNECTED") {
			t.Fatalf("a call allowed the network could not connect: %v\n%s", err, res.Content)
		}
	}
}

// TestSandboxDaemonCannotOutliveTheCall: a command that daemonizes
// (double fork, setsid, nohup, ignoring SIGHUP and SIGTERM) leaves
// nothing running once the call has ended.
func TestSandboxDaemonCannotOutliveTheCall(t *testing.T) {
	needSandbox(t)
	needs(t, "setsid")
	f := newFixture(t)
	out := f.run(t, `(setsid nohup sh -c 'trap "" HUP TERM; echo $$ > daemon.pid; exec sleep 300' >/dev/null 2>&1 &); while [ ! -s daemon.pid ]; do sleep 0.01; done; echo started`)
	if !strings.Contains(out, "started") {
		t.Fatalf("%s", out)
	}
	pid := readPid(t, filepath.Join(f.env.Workspace, "daemon.pid"))
	if !gone(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the daemon %d outlived the call", pid)
	}
}

// TestShellSupervisorKilled is the attack of a command that kills its
// own supervisor to leave an escaped process behind. With the sandbox
// the kill is refused (the supervisor is outside the command's Landlock
// domain) and the call completes; without it the kill succeeds, the
// call fails with an execution error saying so, and either way no
// `sleep 3141` is left once the call has returned.
func TestShellSupervisorKilled(t *testing.T) {
	needs(t, "setsid")
	const attack = "setsid sleep 3141 & sleep 0.3; kill -9 $PPID; echo kill=$?"
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "sandbox", true: "no sandbox"}[off], func(t *testing.T) {
			if !off {
				needSandbox(t)
			}
			env := newEnv(t, t.TempDir())
			sh := tool.Shell{Grace: 300 * time.Millisecond, Sandbox: sandbox.Settings{Off: off}}
			res, err := sh.Run(context.Background(), env, shellIn(attack, 30))
			if off {
				var te *tool.Error
				if !errors.As(err, &te) || te.Class != tool.ClassExecution || !strings.Contains(te.Message, "supervisor was killed") {
					t.Errorf("the call did not fail as killed: %v %q", err, res.Content)
				}
			} else if err != nil || !strings.Contains(res.Content, "kill=1") || !strings.Contains(res.Content, "not permitted") {
				t.Errorf("the kill was not refused: %v\n%s", err, res.Content)
			}
			if n := processesRunning(t, "sleep", "3141"); n > 0 {
				t.Fatalf("%d escaped sleep 3141 outlived the call", n)
			}
		})
	}
}

// TestShellTMPDIRPerCall: every call gets an empty TMPDIR of its own,
// removed after the call with everything in it, even a directory left
// unreadable.
func TestShellTMPDIRPerCall(t *testing.T) {
	for _, off := range []bool{false, true} {
		env := newEnv(t, t.TempDir())
		sh := tool.Shell{Sandbox: sandbox.Settings{Off: off, CacheDir: filepath.Join(t.TempDir(), "cache")}}
		out1, err := sh.Run(context.Background(), env, shellIn(`echo "$TMPDIR"; ls -A "$TMPDIR" | wc -l; mkdir -p "$TMPDIR/a/b" && touch "$TMPDIR/a/b/f" && chmod 000 "$TMPDIR/a"`, 0))
		if err != nil {
			t.Fatal(err)
		}
		out2, err := sh.Run(context.Background(), env, shellIn(`echo "$TMPDIR"`, 0))
		if err != nil {
			t.Fatal(err)
		}
		l1 := strings.Split(strings.TrimPrefix(out1.Content, "exit code: 0\nstdout:\n"), "\n")
		l2 := strings.Split(strings.TrimPrefix(out2.Content, "exit code: 0\nstdout:\n"), "\n")
		if l1[0] == "" || l1[0] == l2[0] || strings.TrimSpace(l1[1]) != "0" {
			t.Fatalf("off=%v: TMPDIRs %q and %q", off, out1.Content, out2.Content)
		}
		for _, d := range []string{l1[0], l2[0]} {
			if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("off=%v: %s left behind: %v", off, d, err)
			}
		}
	}
}

// TestSandboxOrdinaryWork: what a coding agent does all day still works
// in the sandbox: go build and go test of a module in the workspace,
// git init, add and commit, npm test. The first run fills the
// sandbox's Go build cache and can take minutes on a slow machine.
func TestSandboxOrdinaryWork(t *testing.T) {
	needSandbox(t)
	if testing.Short() {
		t.Skip("slow: builds Go's test dependencies into the sandbox's cache the first time")
	}
	ws := t.TempDir()
	env := newEnv(t, ws)
	sh := tool.Shell{} // the defaults a user gets
	for _, c := range []struct{ prog, cmd, want string }{
		{"go", "go build ./... && echo BUILD-OK && go test -count=1 ./...", "ok  \texample.com/tiny"},
		{"git", "git init -q . && git add -A && git -c user.name=t -c user.email=t@example.com commit -qm init && git status --short && git log --oneline", " init"},
		{"npm", "npm test --offline 2>&1", "node ok"},
	} {
		t.Run(c.prog, func(t *testing.T) {
			needs(t, c.prog)
			mustWrite(t, filepath.Join(ws, "go.mod"), "module example.com/tiny\n\ngo 1.22\n")
			mustWrite(t, filepath.Join(ws, "tiny.go"), "package tiny\n\nfunc Add(a, b int) int { return a + b }\n")
			mustWrite(t, filepath.Join(ws, "tiny_test.go"), "package tiny\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n")
			mustWrite(t, filepath.Join(ws, "package.json"), `{"name":"tiny","version":"1.0.0","scripts":{"test":"node test.js"}}`)
			mustWrite(t, filepath.Join(ws, "test.js"), `require("assert").strictEqual(1 + 2, 3); console.log("node ok")`)
			res, err := sh.Run(context.Background(), env, shellIn(c.cmd, 900))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Content, "exit code: 0") || !strings.Contains(res.Content, c.want) {
				t.Fatalf("%s failed in the sandbox:\n%s", c.prog, res.Content)
			}
		})
	}
}

// countingListener listens on a loopback TCP port until the test ends
// and counts the connections it accepts (a sandboxed command must make
// none).
func countingListener(t *testing.T) (port string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), accepted
}
