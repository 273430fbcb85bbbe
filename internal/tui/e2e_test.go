package tui

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The end-to-end test drives the real program in a real terminal: tmux
// runs this test binary as the TUI (see TestMain) against `metis serve`
// built from ./cmd/metis and started as a separate process; keys go in
// with send-keys and the screen comes back with capture-pane.
func TestEndToEndInTmux(t *testing.T) {
	e := newE2E(t)
	dir, metis, home, ws, addr, self := e.dir, e.metis, e.home, e.ws, e.addr, e.self
	srv := startServe(t, metis, addr, home, filepath.Join(dir, "serve.log"))

	tm := &tmux{t: t, bin: e.tmuxBin, sock: filepath.Join(dir, "tmux.sock")}
	exitFile := filepath.Join(dir, "exit")
	tm.run("new-session", "-d", "-s", "tui", "-x", "120", "-y", "50", "-c", ws,
		fmt.Sprintf("env %s=1 %s --server %s; echo $? > %s", mainEnv, shq(self), shq("http://"+addr), shq(exitFile)))
	t.Cleanup(func() { _ = tm.cmd("kill-server").Run() })

	tm.waitFor("the session to attach", func(s string) bool { return strings.Contains(s, "idle ·") })

	// A turn streams; ctrl-c cancels it.
	tm.keys("/long 300", "Enter")
	tm.waitFor("streamed text", func(s string) bool { return strings.Contains(s, "Sentence 3 of 300.") })
	tm.keys("C-c")
	scr := tm.waitFor("(cancelled)", func(s string) bool { return strings.Contains(s, "(cancelled)") && strings.Contains(s, "idle ·") })
	cancelled := between(scr, "› /long 300", "(cancelled)")
	if !strings.Contains(cancelled, "Sentence 1 of 300.") || strings.Contains(cancelled, "Sentence 300 of 300.") {
		t.Fatalf("cancelled message:\n%s", scr)
	}

	// The server goes away: reconnecting. It comes back on the same
	// address and home: the stream resumes and nothing is shown twice.
	stopServe(t, srv)
	tm.waitFor("reconnecting", func(s string) bool { return strings.Contains(s, "reconnecting…") })
	srv = startServe(t, metis, addr, home, filepath.Join(dir, "serve2.log"))
	tm.waitFor("the stream to resume", func(s string) bool {
		return !strings.Contains(s, "reconnecting") && strings.Contains(s, "idle ·")
	})
	tm.keys("/echo hello again", "Enter")
	answer := regexp.MustCompile(`(?m)^hello again\s*$`)
	scr = tm.waitFor("the answer", func(s string) bool { return answer.MatchString(s) && strings.Contains(s, "idle ·") })
	if n := len(answer.FindAllString(scr, -1)); n != 1 {
		t.Fatalf("the answer is shown %d times:\n%s", n, scr)
	}
	if n := strings.Count(scr, "Sentence 1 of 300."); n != 1 {
		t.Fatalf("the cancelled text is shown %d times:\n%s", n, scr)
	}
	if got := between(scr, "› /long 300", "(cancelled)"); got != cancelled {
		t.Fatalf("the cancelled message changed across the restart:\nbefore:\n%s\nafter:\n%s", cancelled, got)
	}

	// Another client renames and archives the session: the header
	// follows at once, with no turn.
	renameFromOutside(t, addr, map[string]any{"title": "renamed from outside", "archived": true})
	tm.waitFor("the rename in the header", func(s string) bool {
		return strings.Contains(strings.SplitN(s, "\n", 2)[0], "metis · renamed from outside (archived) · ")
	})

	// Idle: ctrl-c twice quits, cleanly.
	tm.keys("C-c")
	tm.waitFor("the quit prompt", func(s string) bool { return strings.Contains(s, "press ctrl-c again to quit") })
	tm.keys("C-c")
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(exitFile)
		if err == nil && strings.TrimSpace(string(b)) != "" {
			if code := strings.TrimSpace(string(b)); code != "0" {
				t.Fatalf("the TUI exited with %s", code)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the TUI did not exit:\n%s", tm.capture())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopServe(t, srv)
}

// e2e is what an end-to-end test in tmux needs: tmux, this test binary
// (run as the TUI, see TestMain), metis built from ./cmd/metis, a home,
// a workspace and a free address for `metis serve`.
type e2e struct {
	tmuxBin, self, metis string
	dir, home, ws, addr  string
}

// newE2E skips the test under -short or without tmux, and builds metis.
func newE2E(t *testing.T) *e2e {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the tmux end-to-end test")
	}
	tmuxBin, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed (apt-get install -y tmux); skipping the end-to-end TUI test")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &e2e{tmuxBin: tmuxBin, self: self, dir: dir, metis: buildMetis(t, dir),
		home: filepath.Join(dir, "home"), ws: filepath.Join(dir, "ws"), addr: freeAddr(t)}
	if err := os.MkdirAll(e.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// tmux drives one private tmux server.
type tmux struct {
	t         *testing.T
	bin, sock string
	last      string
}

func (x *tmux) cmd(args ...string) *exec.Cmd {
	c := exec.Command(x.bin, append([]string{"-S", x.sock}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") { // the test may itself run inside tmux
			c.Env = append(c.Env, kv)
		}
	}
	return c
}

func (x *tmux) run(args ...string) string {
	x.t.Helper()
	out, err := x.cmd(args...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

func (x *tmux) keys(keys ...string) { x.run(append([]string{"send-keys", "-t", "tui"}, keys...)...) }

func (x *tmux) capture() string {
	out, err := x.cmd("capture-pane", "-p", "-t", "tui").CombinedOutput()
	if err != nil {
		return x.last + "\n(capture-pane: " + err.Error() + ": " + string(out) + ")"
	}
	x.last = string(out)
	return x.last
}

// waitFor polls the screen until cond holds and returns that screen.
func (x *tmux) waitFor(what string, cond func(string) bool) string {
	x.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := x.capture()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("timed out waiting for %s; the screen:\n%s", what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// built is metis built once for every end-to-end test of the package
// (a build takes minutes on a loaded machine); TestMain removes it.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
	out  []byte
}

// buildMetis builds ./cmd/metis, once for the package's tests (dir is
// unused: the binary lives in a directory of its own).
func buildMetis(t *testing.T, _ string) string {
	t.Helper()
	built.once.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			built.err = err
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "metis-tui-e2e-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "metis")
		cmd := exec.Command("go", "build", "-o", built.bin, "./cmd/metis")
		cmd.Dir = root
		built.out, built.err = cmd.CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build ./cmd/metis: %v\n%s", built.err, built.out)
	}
	return built.bin
}

// removeBuilt removes the binary buildMetis built, if any.
func removeBuilt() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// startServe runs `metis serve` and waits for its ready line.
func startServe(t *testing.T, bin, addr, home, logPath string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--addr", addr, "--home", home, "--demo-delay", "20ms", "--log-level", "debug")
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		logf.Close()
	})
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		seen := false
		for sc.Scan() { // read to the end so the server never blocks on stdout
			if !seen && strings.HasPrefix(sc.Text(), "metis serving") {
				seen = true
				ready <- nil
			}
		}
		if !seen {
			ready <- fmt.Errorf("metis serve ended without its ready line (log %s)", logPath)
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%v\n%s", err, b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("metis serve did not become ready")
	}
	return cmd
}

// stopServe stops a server the way a user would (SIGTERM) and waits.
func stopServe(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// between is the text from the line holding from to the line holding to.
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i:], to)
	if j < 0 {
		return ""
	}
	return s[i : i+j+len(to)]
}

// renameFromOutside sends PATCH /sessions/{id} with edit for the
// server's only session, as another client would.
func renameFromOutside(t *testing.T, addr string, edit map[string]any) {
	t.Helper()
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	res, err := http.Get("http://" + addr + "/sessions")
	if err == nil {
		err = json.NewDecoder(res.Body).Decode(&list)
		res.Body.Close()
	}
	if err != nil || len(list.Sessions) != 1 {
		t.Fatalf("GET /sessions: %v %+v", err, list)
	}
	body, _ := json.Marshal(edit)
	req, _ := http.NewRequest(http.MethodPatch, "http://"+addr+"/sessions/"+list.Sessions[0].ID, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PATCH: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("PATCH: %s", res.Status)
	}
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
