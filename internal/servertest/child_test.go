package servertest_test

import (
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// childEnv, when set, makes TestMain serve a server on the home it
// names instead of running the tests.
const childEnv = "METIS_SERVERTEST_CHILD"

func TestMain(m *testing.M) {
	if home := os.Getenv(childEnv); home != "" {
		cfg := config.Defaults()
		cfg.Home, cfg.Addr, cfg.DemoDelay = home, "127.0.0.1:0", 0
		os.Exit(servertest.ServeChild(cfg))
	}
	goleak.VerifyTestMain(m)
}

func startChild(t *testing.T, home string) *servertest.Child {
	t.Helper()
	// The harness's requests keep connections of the default client
	// open; closed after the child is killed, they leak nothing.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return servertest.StartChild(t, servertest.ChildOptions{Env: childEnv, Value: home, Home: home,
		LogName: "child.log", Name: "the child server"})
}

// TestChildKilledAndRestartedKeepsItsHome: a child serves the API on its
// home; killed with SIGKILL it answers no more, and a child started
// again on the same home has the session the first one created.
func TestChildKilledAndRestartedKeepsItsHome(t *testing.T) {
	home := t.TempDir()
	c := startChild(t, home)
	sid := c.CreateSession()
	c.Kill()
	if resp, err := http.Get(c.URL + "/sessions/" + sid); err == nil {
		resp.Body.Close()
		t.Fatalf("a killed child answered: %d", resp.StatusCode)
	}
	c2 := startChild(t, home)
	if st := c2.Do("GET", "/sessions/"+sid, nil, nil); st != http.StatusOK {
		t.Fatalf("session %s after the restart: status %d, want 200", sid, st)
	}
}

// TestChildPausedAnswersAfterResume: a paused child answers no request
// until it is resumed, and then answers again.
func TestChildPausedAnswersAfterResume(t *testing.T) {
	c := startChild(t, t.TempDir())
	c.Pause(t)
	quick := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{}}
	defer quick.CloseIdleConnections()
	if resp, err := quick.Get(c.URL + "/sessions"); err == nil {
		resp.Body.Close()
		t.Fatalf("a paused child answered: %d", resp.StatusCode)
	}
	c.Resume(t)
	if st := c.Do("GET", "/sessions", nil, nil); st != http.StatusOK {
		t.Fatalf("GET /sessions after Resume: status %d, want 200", st)
	}
}
