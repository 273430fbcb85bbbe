package server

import (
	"log/slog"
	"net"
	"strconv"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/sandbox"
)

// sandboxSettings are the shell sandbox's settings from cfg: besides
// the configured hidden paths, the server's own secrets are hidden from
// every command: its home (the database, the token, config.yaml with
// the provider keys), and the token, TLS key and NATS credentials files
// wherever they are.
func sandboxSettings(cfg config.Config) sandbox.Settings {
	hidden := append([]string{}, cfg.SandboxHidden...)
	for _, p := range []string{cfg.Home, cfg.TokenFile, cfg.TLSKey, cfg.NATSCreds} {
		if p != "" {
			hidden = append(hidden, p)
		}
	}
	return sandbox.Settings{Off: cfg.SandboxOff, Writable: cfg.SandboxWritable, Hidden: hidden, Network: cfg.SandboxNetwork}
}

// startSandbox probes the kernel for the shell sandbox, says loudly
// when it is off or unavailable, records its state in the metrics and
// makes this process a subreaper for the processes of shell calls
// whose supervisor was killed (swept by sandbox.WatchEscaped, started
// with the background tasks).
func (s *Server) startSandbox() {
	s.Sandbox = sandbox.Probe(!s.Config.SandboxOff)
	state := "confined"
	switch {
	case !s.Sandbox.Enabled:
		state = "off"
		s.Log.Warn("the shell sandbox is OFF (--sandbox=false): shell commands run with this server's rights; they can read and change every file it can, its home included (the database, the token, the provider keys in config.yaml), and reach the network")
	case !s.Sandbox.Available:
		state = "unavailable"
		s.Log.Warn("the shell sandbox is unavailable: shell commands run unconfined", "reason", s.Sandbox.Reason)
	case s.Sandbox.Reason != "":
		s.Log.Info("shell sandbox", "landlock_abi", s.Sandbox.ABI, "limits", s.Sandbox.Reason)
	}
	s.Metrics.SandboxInfo(state, s.Sandbox.ABI)
	if err := sandbox.BecomeSubreaper(); err != nil {
		s.Log.Warn("cannot adopt the processes of a killed shell supervisor; they may outlive their call", "err", err)
	}
}

// shellCallRefuser refuses unix-socket connections from the processes
// of running shell calls: Landlock below ABI 9 does not restrict
// connecting to a pathname unix socket, and a command must not drive
// this server's API (create sessions, answer approvals) through it.
type shellCallRefuser struct {
	net.Listener
	log *slog.Logger
}

// Accept returns the next connection not made by a shell call.
func (l shellCallRefuser) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		pid, ok := peerPid(c)
		if !ok || !sandbox.FromShellCall(pid) {
			return c, nil
		}
		l.log.Warn("refused a unix-socket connection from a shell command", "pid", strconv.Itoa(pid))
		_ = c.Close()
	}
}

// policySandbox is the sandbox's state as the permission policy knows
// it: the one a test harness configured, else the probe's.
func policySandbox(configured permission.Sandbox, st sandbox.Status) permission.Sandbox {
	switch {
	case configured != permission.SandboxUnknown:
		return configured
	case !st.Enabled:
		return permission.SandboxDisabled
	case !st.Available:
		return permission.SandboxUnavailable
	}
	return permission.SandboxEnforced
}
