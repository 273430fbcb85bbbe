package spectest_test

// A real crash: the server runs in a child process (this test binary
// again, procServerEnv set), is killed with SIGKILL mid-answer and
// started again on the same home.

import (
	"bufio"
	"context"
	"encoding/json"
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
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// procServerEnv, when set, makes TestMain serve one metis server instead
// of running the tests. Its value is the home; the demo model streams
// with a small delay.
const procServerEnv = "METIS_SPECTEST_SERVER"

func runProcServer() int {
	cfg := config.Defaults()
	cfg.Home, cfg.Addr, cfg.DemoDelay = os.Getenv(procServerEnv), "127.0.0.1:0", 5*time.Millisecond
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := server.New(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		fmt.Fprintln(os.Stderr, "procserver:", err)
		return 1
	}
	if err := srv.Run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "procserver:", err)
		return 1
	}
	return 0
}

// procServer is a metis server in a child process.
type procServer struct {
	*servertest.Harness // URL, Home, Workspace, Do, CreateSession, Submit
	cmd                 *exec.Cmd
	exited              chan struct{}
}

// startProcServer starts a server on home in a child process and waits
// for its ready line; it is killed when the test ends.
func startProcServer(t *testing.T, home string) *procServer {
	t.Helper()
	ws := filepath.Join(home, "workspace")
	servertest.Must(t, os.MkdirAll(ws, 0o755))
	logPath := filepath.Join(home, fmt.Sprintf("server-%d.log", time.Now().UnixNano()))
	logFile, err := os.Create(logPath)
	servertest.Must(t, err)
	defer logFile.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), procServerEnv+"="+home)
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	servertest.Must(t, err)
	servertest.Must(t, cmd.Start())
	p := &procServer{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		defer close(p.exited)
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
		p.kill()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("log of the server process:\n%s", b)
			}
		}
	})
	select {
	case line := <-ready:
		f := strings.Fields(line) // "metis serving http://127.0.0.1:PORT (home …"
		if len(f) < 3 || f[1] != "serving" {
			t.Fatalf("unexpected ready line %q", line)
		}
		p.Harness = &servertest.Harness{T: t, URL: f[2], Home: home, Workspace: ws, HTTP: http.DefaultClient}
	case <-p.exited:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("the server process exited before it was ready:\n%s", b)
	case <-time.After(60 * time.Second):
		t.Fatal("the server process printed no ready line")
	}
	return p
}

// kill kills the process with SIGKILL (nothing flushed, nothing ended)
// and waits until it is gone.
func (p *procServer) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// TestCrashMidCallReportsStreamingGap (issue 20, item 5): a client that
// held deltas of an answer when the server was killed (SIGKILL) resumes,
// after the restart, from its last delta. Those deltas' successors died
// with the ring, so the ack must say streaming_gap: true; and the
// replay carries the end recovery gave the open model call,
// llm.call_failed (cancelled) for its message, before the turn's
// turn.cancelled (server_restart).
func TestCrashMidCallReportsStreamingGap(t *testing.T) {
	streamtest.EachTransport(t, testCrashMidCallReportsStreamingGap)
}

func testCrashMidCallReportsStreamingGap(t *testing.T, tr streamtest.Transport) {
	home := t.TempDir()
	p := startProcServer(t, home)
	sid := p.CreateSession()
	turn := p.Submit(sid, "/long 300")
	c, _, _ := streamtest.Subscribe(t, tr, p.URL, sid, readTimeout, "preset:chat", nil, false)
	var cursor, msgID string
	for n := 0; n < 20; {
		f := streamtest.NextFrame(t, c, readTimeout)
		if f.Event == nil {
			continue
		}
		if f.Event.Type == string(event.TextDelta) {
			n++
			msgID = streamtest.PayloadOf[streamtest.DeltaPayload](t, f.Event).MessageID
		}
		cursor = f.Event.ID
	}
	c.Close()
	p.kill()

	p2 := startProcServer(t, home)
	c2, ack, _ := streamtest.Subscribe(t, tr, p2.URL, sid, readTimeout, "preset:chat", &cursor, false)
	if !ack.StreamingGap {
		t.Fatalf("resumed from delta %s after a crash mid-answer: ack %+v, want streaming_gap true", cursor, ack)
	}
	replay := streamtest.ReadEvents(t, c2, readTimeout, ack.ReplayEventCount)
	var types []string
	var failed protocol.LLMCallFailedPayload
	for _, e := range replay {
		types = append(types, e.Type)
		if e.Type == string(event.LLMCallFailed) {
			if err := json.Unmarshal(e.Payload, &failed); err != nil {
				t.Fatal(err)
			}
		}
	}
	if strings.Join(types, ",") != "llm.call_failed,turn.cancelled" || failed.MessageID != msgID || failed.ErrorClass != "cancelled" {
		t.Fatalf("replay after the crash: %v (llm.call_failed %+v), want llm.call_failed (cancelled) of %s, then turn.cancelled", types, failed, msgID)
	}
	var end protocol.TurnCancelledPayload
	if err := json.Unmarshal(replay[1].Payload, &end); err != nil || end.Reason != protocol.CancelReasonServerRestart || *replay[1].TurnID != turn {
		t.Fatalf("turn.cancelled %s, want reason server_restart for turn %s", replay[1].Payload, turn)
	}
}
