package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run the test binary as the metis command (TestMain): a
// real server process, started the way a user starts it, with provider
// keys in its environment, driven through its HTTP API by the builtin
// demo model's "/tool shell {...}" prompt. The shell commands are the
// attacker's.

// mainArg0 makes the test binary run main (argv[0] survives the
// shield's re-exec, so the re-exec'd process runs main too).
const mainArg0 = "metis-e2e-main"

func TestMain(m *testing.M) {
	if os.Args[0] == mainArg0 {
		main()
		return
	}
	os.Exit(m.Run())
}

// fakeKeys are provider keys and other secrets a server is started with.
var fakeKeys = map[string]string{
	"OPENAI_API_KEY":        "sk-fake-openai-e2e-1111",
	"ANTHROPIC_API_KEY":     "sk-ant-fake-e2e-2222",
	"GITHUB_TOKEN":          "ghp_fake_e2e_3333",
	"AWS_SECRET_ACCESS_KEY": "aws-fake-e2e-4444",
}

func keyEnv(home string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8"}
	for k, v := range fakeKeys {
		env = append(env, k+"="+v)
	}
	return env
}

// e2eServer is a metis server process under test.
type e2eServer struct {
	url, home, ws string
	cmd           *exec.Cmd
}

// nobody is the credential of the unprivileged user tests run a server
// as, when they run as root.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// binary returns the test binary, copied where cred's user can run it.
func binary(t *testing.T, cred *syscall.Credential) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if cred == nil {
		return self
	}
	dir, err := os.MkdirTemp("", "metis-e2e-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "metis")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// ownedDir makes a directory for cred's user (the test's own when nil).
func ownedDir(t *testing.T, cred *syscall.Credential, mode os.FileMode) string {
	t.Helper()
	d, err := os.MkdirTemp("", "metis-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// startServer runs `metis serve` with the fake keys in its environment,
// as cred's user (nil: the test's), with more flags, and waits for its
// ready line. Its sessions run in auto mode: these tests are about what
// a command can reach once it runs, not about asking first.
func startServer(t *testing.T, cred *syscall.Credential, flags ...string) *e2eServer {
	t.Helper()
	s := &e2eServer{home: ownedDir(t, cred, 0o700), ws: ownedDir(t, cred, 0o755)}
	args := append([]string{"serve", "--home", s.home, "--addr", "127.0.0.1:0", "--default-model", "builtin:demo", "--demo-delay", "0s",
		"--default-mode", "auto"}, flags...)
	s.cmd = exec.Command(binary(t, cred), args...)
	s.cmd.Args[0] = mainArg0
	s.cmd.Env = keyEnv(s.home)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var stderr bytes.Buffer
	s.cmd.Stderr = &stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server log:\n%s", stderr.String())
		}
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "serving" {
			t.Fatalf("ready line %q; log:\n%s", line, stderr.String())
		}
		s.url = f[2]
	case <-time.After(60 * time.Second):
		t.Fatalf("no ready line; log:\n%s", stderr.String())
	}
	return s
}

func (s *e2eServer) pid() int { return s.cmd.Process.Pid }

func (s *e2eServer) do(t *testing.T, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// shell has the demo model call the shell tool with command in a new
// session and returns the tool result the model got.
func (s *e2eServer) shell(t *testing.T, command string) (content string, isError bool) {
	t.Helper()
	var sess struct {
		ID string `json:"id"`
	}
	s.do(t, "POST", "/sessions", map[string]string{"workspace_path": s.ws}, &sess)
	in, _ := json.Marshal(map[string]any{"command": command, "timeout_s": 60})
	s.do(t, "POST", "/sessions/"+sess.ID+"/turns", map[string]string{"content": "/tool shell " + string(in)}, nil)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var got struct {
			Session struct {
				CurrentTurnID *string `json:"current_turn_id"`
				TurnCount     int     `json:"turn_count"`
			} `json:"session"`
		}
		s.do(t, "GET", "/sessions/"+sess.ID, nil, &got)
		if got.Session.CurrentTurnID == nil && got.Session.TurnCount > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var page struct {
		Messages []struct {
			Content []struct {
				Type    string `json:"type"`
				Content string `json:"content"`
				IsError bool   `json:"is_error"`
			} `json:"content"`
		} `json:"messages"`
	}
	s.do(t, "GET", "/sessions/"+sess.ID+"/messages", nil, &page)
	for _, m := range page.Messages {
		for _, b := range m.Content {
			if b.Type == "tool_result" {
				return b.Content, b.IsError
			}
		}
	}
	t.Fatal("no tool result")
	return "", false
}

// users are the identities a server runs as in these tests: the test's
// own, and nobody when the test runs as root.
func users(t *testing.T) map[string]*syscall.Credential {
	u := map[string]*syscall.Credential{"same user": nil}
	if os.Geteuid() == 0 {
		u["nobody"] = nobody
	} else {
		t.Log("not root: the server runs as the test's user only")
	}
	return u
}

// TestToolsCannotReachTheServersKeys: a shell command reads the
// environment of its ancestors (the supervisor, the server, by $PPID
// and by the server's pid), the server's memory through
// /proc/<pid>/mem at a mapped address, and its open files through
// /proc/<pid>/fd. None of it yields a key: not with the sandbox, not
// without it, not when the server and the tool are root, not when they
// are another user. The server runs with a core size limit of 0.
func TestToolsCannotReachTheServersKeys(t *testing.T) {
	for who, cred := range users(t) {
		for _, sandboxFlag := range []string{"--sandbox=true", "--sandbox=false"} {
			t.Run(who+" "+sandboxFlag, func(t *testing.T) {
				s := startServer(t, cred, sandboxFlag)
				pid := strconv.Itoa(s.pid())
				attack := strings.Join([]string{
					`tr '\0' '\n' < /proc/` + pid + `/environ`,
					`tr '\0' '\n' < /proc/$PPID/environ`,
					`tr '\0' '\n' < /proc/$(ps -o ppid= -p $PPID | tr -d ' ')/environ`,
					`a=$(head -1 /proc/` + pid + `/maps | cut -d- -f1); [ -n "$a" ] && echo mem=$(dd if=/proc/` + pid + `/mem bs=4096 skip=$((0x$a / 4096)) count=1 2>/dev/null | wc -c)`,
					`ls -l /proc/` + pid + `/fd/ | grep metis.db`,
					`true`,
				}, "; ")
				out, _ := s.shell(t, attack)
				for k, v := range fakeKeys {
					if strings.Contains(out, v) {
						t.Errorf("%s reached the tool:\n%s", k, out)
					}
				}
				if strings.Contains(out, "mem=4096") || strings.Contains(out, "metis.db\n") {
					t.Errorf("the server's memory or files were reached:\n%s", out)
				}
				if !strings.Contains(out, "/proc/"+pid+"/environ: Permission denied") {
					t.Errorf("the environ read was not refused:\n%s", out)
				}
				limits, err := os.ReadFile("/proc/" + pid + "/limits")
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(strings.Join(strings.Fields(string(limits)), " "), "Max core file size 0 0 bytes") {
					t.Errorf("core dumps are not off:\n%s", limits)
				}
			})
		}
	}
}

// TestKilledSupervisorEndToEnd: `setsid sleep 3141 & sleep 0.3; kill -9
// $PPID` in a real server. Without the sandbox the kill succeeds: the
// call ends failed, saying so, and no sleep 3141 is left. With it, the
// kill is refused and the call completes; no sleep 3141 is left either.
func TestKilledSupervisorEndToEnd(t *testing.T) {
	for _, c := range []struct {
		flag, want string
		isError    bool
	}{
		{"--sandbox=false", "supervisor was killed", true},
		{"--sandbox=true", "Operation not permitted", false},
	} {
		t.Run(c.flag, func(t *testing.T) {
			s := startServer(t, nil, c.flag)
			out, isError := s.shell(t, "setsid sleep 3141 & sleep 0.3; kill -9 $PPID; echo kill=$?")
			if isError != c.isError || !strings.Contains(out, c.want) {
				t.Errorf("is_error %v, result:\n%s", isError, out)
			}
			deadline := time.Now().Add(5 * time.Second)
			for n := sleeps3141(); n > 0; n = sleeps3141() {
				if time.Now().After(deadline) {
					t.Fatalf("%d sleep 3141 outlived the call", n)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// sleeps3141 counts the running processes whose command line is
// "sleep 3141".
func sleeps3141() int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == "sleep\x003141\x00" {
			if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !strings.Contains(string(st), ") Z ") {
				n++
			}
		}
	}
	return n
}

// TestShellCannotDriveTheAPIOverTheSocket: a confined command connects
// to the server's unix socket (Landlock below ABI 9 does not stop that)
// and is refused, while the test, not a shell call, is served there.
func TestShellCannotDriveTheAPIOverTheSocket(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	s := startServer(t, nil)
	sock := filepath.Join(s.home, "metis.sock")
	out, _ := s.shell(t, "curl -sS --unix-socket "+sock+" http://localhost/sessions; echo rc=$?")
	if strings.Contains(out, `"sessions"`) || strings.Contains(out, "rc=0") {
		t.Fatalf("a shell command was served over the socket:\n%s", out)
	}
	own, err := exec.Command("curl", "-sS", "--unix-socket", sock, "http://localhost/sessions").Output()
	if err != nil || !strings.Contains(string(own), `"sessions"`) {
		t.Fatalf("the socket refuses its user too: %v %s", err, own)
	}
}

// TestACPAfterTheShield: `metis acp` started with keys in its
// environment re-execs itself to hide them and still speaks JSON-RPC on
// the same stdin and stdout.
func TestACPAfterTheShield(t *testing.T) {
	s := startServer(t, nil)
	home := ownedDir(t, nil, 0o700)
	cmd := exec.Command(binary(t, nil), "acp", "--server", s.url, "--log-file", filepath.Join(home, "acp.log"))
	cmd.Args[0] = mainArg0
	cmd.Env = append(keyEnv(home), "METIS_HOME="+home)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":1`) || !strings.Contains(line, `"protocolVersion":1`) {
		t.Fatalf("initialize: %q %v", line, err)
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/environ")
	if err == nil {
		for k, v := range fakeKeys {
			if strings.Contains(string(env), v) {
				t.Errorf("%s is visible in metis acp's /proc/<pid>/environ", k)
			}
		}
	} else if !os.IsPermission(err) {
		t.Fatal(err)
	}
	stdin.Close()
}
