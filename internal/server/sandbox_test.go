package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/sandbox"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/servertest"
)

// readyLine runs a server on cfg until its ready line is out.
func readyLine(t *testing.T, cfg config.Config, log *slog.Logger) string {
	t.Helper()
	srv, err := server.New(context.Background(), cfg, log)
	servertest.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	done := make(chan error, 1)
	lines := make(chan string, 1)
	go func() { done <- srv.Run(ctx, &lineWriter{w: &out, line: lines}) }()
	line := <-lines
	cancel()
	servertest.Must(t, <-done)
	return line
}

// TestReadyLineSaysTheSandbox: the ready line says whether shell
// commands run confined: the Landlock ABI when they do, "sandbox OFF"
// with a WARN when the setting turned it off, "sandbox unavailable" with
// the reason when the kernel cannot enforce it; and so does the
// metis_shell_sandbox_info metric.
func TestReadyLineSaysTheSandbox(t *testing.T) {
	h := servertest.Start(t, "")
	h.Stop()
	cfg := h.Config
	cfg.Addr = "127.0.0.1:0"
	status := sandbox.Probe(true)
	line := readyLine(t, cfg, nil)
	want := "; sandbox landlock ABI "
	if !status.Available {
		want = "; sandbox unavailable (" + status.Reason + ")"
	}
	if !strings.Contains(line, want) {
		t.Errorf("ready line %q lacks %q", line, want)
	}

	cfg.SandboxOff = true
	var log bytes.Buffer
	line = readyLine(t, cfg, slog.New(slog.NewTextHandler(&log, nil)))
	if !strings.Contains(line, "; sandbox OFF (--sandbox=false): shell commands run with the server's rights") {
		t.Errorf("ready line %q does not say the sandbox is off", line)
	}
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "the shell sandbox is OFF") {
		t.Errorf("no WARN at start:\n%s", log.String())
	}
}

// TestSandboxStatusInMetrics: the server's Sandbox status and its metric.
func TestSandboxStatusInMetrics(t *testing.T) {
	for _, off := range []bool{false, true} {
		h := servertest.Start(t, "", func(c *config.Config) { c.SandboxOff = off })
		st := h.Server.Sandbox
		if st.Enabled == off {
			t.Errorf("off=%v: status %+v", off, st)
		}
		res, err := http.Get(h.URL + "/metrics")
		servertest.Must(t, err)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		state := "confined"
		switch {
		case off:
			state = "off"
		case !st.Available:
			state = "unavailable"
		}
		if !strings.Contains(string(b), `metis_shell_sandbox_info{landlock_abi="`) || !strings.Contains(string(b), `state="`+state+`"} 1`) {
			t.Errorf("off=%v: metric missing:\n%s", off, grepLines(string(b), "sandbox"))
		}
	}
}
