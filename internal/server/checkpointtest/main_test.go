package checkpointtest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// serveEnv, when set in the environment of the test binary, makes
// TestMain serve a metis server on the home it names instead of running
// the tests: a server the test can kill with SIGKILL.
const serveEnv = "METIS_CHECKPOINTTEST_HOME"

func TestMain(m *testing.M) {
	if home := os.Getenv(serveEnv); home != "" {
		os.Exit(serve(home))
	}
	code := m.Run()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// serve runs a server on home until it is killed.
func serve(home string) int {
	cfg := config.Defaults()
	cfg.Home, cfg.Addr, cfg.DemoDelay, cfg.Socket = home, "127.0.0.1:0", 0, ""
	// Tools run unasked, as in servertest.Start: auto mode, the sandbox off.
	cfg.DefaultMode, cfg.ShellSandbox = permission.ModeAuto, permission.SandboxDisabled
	return servertest.ServeChild(cfg)
}

// startChild starts a server on home in a child process and waits for
// its ready line; it is killed when the test ends.
func startChild(t *testing.T, home string) *servertest.Child {
	t.Helper()
	return servertest.StartChild(t, servertest.ChildOptions{Env: serveEnv, Value: home, Home: home,
		LogName: "child.log", Name: "the server"})
}

// do sends a JSON request to base and decodes the answer into out.
func do(t testing.TB, base, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

func toolCmd(name string, input any) string {
	b, _ := json.Marshal(input)
	return "/tool " + name + " " + string(b)
}

// tree describes the files under dir but those ignored (*.log): content
// hash, executable bit, symlink target. Directories are left out: a
// checkpoint holds files.
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() || strings.HasSuffix(rel, ".log") {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[rel] = hex.EncodeToString(sum[:6]) + map[bool]string{true: " x", false: ""}[fi.Mode()&0o100 != 0]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// treeDiff describes how two trees differ ("" when they do not).
func treeDiff(want, got map[string]string) string {
	var diffs []string
	for k, v := range want {
		if got[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: want %q, got %q", k, v, got[k]))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: extra %q", k, v))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "\n")
}

func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: checkpoints need it (scripts/setup.sh installs it)")
	}
}

// turns lists a session's turns.
func turns(t testing.TB, base, sid string) protocol.TurnList {
	t.Helper()
	var l protocol.TurnList
	if st := do(t, base, "GET", "/sessions/"+sid+"/turns", nil, &l); st != http.StatusOK {
		t.Fatalf("turns: %d", st)
	}
	return l
}
