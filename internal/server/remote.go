package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/token"
)

// remote is how the server may be reached from beyond loopback: the
// bearer token (when required), TLS, and the public names of the Host
// check. See docs/remote-access.md.
type remote struct {
	loopback  bool   // --addr is a loopback address
	token     string // "" when no token is required; never logged
	tokenPath string
	created   bool // the token file was generated at this start
	tls       *tls.Config
	names     []api.PublicName
}

// setupRemote reads (or generates) the token, loads the TLS key pair and
// parses the public names. The token is required when --addr is not a
// loopback address, when a public name is set (clients reach the server
// through something else, such as a reverse proxy), or when a token file
// is given.
func setupRemote(cfg config.Config, log *slog.Logger) (*remote, error) {
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w", cfg.Addr, err)
	}
	r := &remote{loopback: token.IsLoopbackHost(host)}
	for _, n := range strings.Split(cfg.PublicName, ",") {
		if strings.TrimSpace(n) == "" {
			continue
		}
		p, err := api.ParsePublicName(n)
		if err != nil {
			return nil, fmt.Errorf("--public-name: %w", err)
		}
		r.names = append(r.names, p)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together: give both, or neither")
	}
	if cfg.TLSCert != "" {
		pair, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("TLS key pair (--tls-cert %s, --tls-key %s): %w", cfg.TLSCert, cfg.TLSKey, err)
		}
		// HTTP/1.1 only: the WebSocket upgrade is an HTTP/1.1 affair, and
		// the connection cap then counts clients.
		r.tls = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	if r.loopback && len(r.names) == 0 && cfg.TokenFile == "" {
		return r, nil
	}
	if cfg.TokenFile != "" {
		r.tokenPath = cfg.TokenFile
		r.token, err = token.Read(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		return r, nil
	}
	r.tokenPath = filepath.Join(cfg.Home, token.FileName)
	r.token, r.created, err = token.Ensure(r.tokenPath)
	if err != nil {
		return nil, err
	}
	if r.created {
		log.Info("generated the bearer token", "file", r.tokenPath)
	}
	return r, nil
}

// guard is the local-safety guard for this configuration.
func (r *remote) guard(addr string) api.Guard {
	host, _, _ := net.SplitHostPort(addr)
	g := api.Guard{PublicNames: r.names, TLS: r.tls != nil}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		// Bound to every interface: the machine's own addresses are its
		// names. An IP literal cannot come from DNS rebinding.
		g.ExtraHosts = interfaceAddrs()
	} else {
		g.ExtraHosts = []string{host}
	}
	return g
}

func interfaceAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// readyNote is what the ready line adds about remote access.
func (r *remote) readyNote(addr string) string {
	if r.token == "" {
		return ""
	}
	gen := ""
	if r.created {
		gen = ", just generated"
	}
	where := "reachable from the network (bound to " + addr + ")"
	if r.loopback {
		where = "bound to loopback, token required"
	}
	var names []string
	for _, n := range r.names {
		names = append(names, n.String())
	}
	pub := ""
	if len(names) > 0 {
		pub = "; public name " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("; %s: every request needs the bearer token in %s%s%s", where, r.tokenPath, gen, pub)
}

// TokenFile is the path of the bearer token file when the server
// requires the token, else "".
func (s *Server) TokenFile() string {
	if s.remote == nil || s.remote.token == "" {
		return ""
	}
	return s.remote.tokenPath
}

// recordAddresses writes <home>/addresses.json: every address this
// server serves (the TCP listener as bound, its configured name, the
// public names, the unix socket). A client sends <home>/token only to
// one of them (token.ForClient).
func (s *Server) recordAddresses() error {
	host, port, err := net.SplitHostPort(s.ln.Addr().String())
	if err != nil {
		return fmt.Errorf("addresses file: %w", err)
	}
	addrs := token.HostAddresses(s.scheme(), host, port, interfaceAddrs())
	if h, _, err := net.SplitHostPort(s.Config.Addr); err == nil && h != "" && net.ParseIP(strings.Trim(h, "[]")) == nil {
		addrs = append(addrs, token.Address{Scheme: s.scheme(), Host: token.NormalHost(h), Port: port})
	}
	for _, n := range s.remote.names {
		addrs = append(addrs, token.Address{Scheme: n.Scheme, Host: n.Host, Port: n.Port})
	}
	if s.sock != nil {
		p, err := filepath.Abs(s.sock.path)
		if err != nil {
			return fmt.Errorf("addresses file: %w", err)
		}
		addrs = append(addrs, token.Address{Scheme: "unix", Path: p})
	}
	if err := token.WriteAddresses(s.Config.Home, addrs); err != nil {
		return err
	}
	s.recorded = true
	return nil
}

// forgetAddresses removes the addresses file at shutdown, while the
// home is still this server's.
func (s *Server) forgetAddresses() {
	if !s.recorded {
		return
	}
	if err := token.RemoveAddresses(s.Config.Home); err != nil {
		s.Log.Warn("remove the addresses file", "err", err)
	}
}
