package api

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// PublicName is a name clients reach the server by other than its listen
// address: a DNS name or address, optionally with a port, optionally
// with the scheme of its pages (https when a TLS proxy is in front).
type PublicName struct {
	Scheme string // "", "http" or "https"
	Host   string // lower case, no brackets, no trailing dot
	Port   string // "" accepts any port
}

// ParsePublicName parses --public-name: "host", "host:port",
// "[v6addr]:port", or one of those after "http://" or "https://". It
// refuses paths, users, queries and wildcards.
func ParsePublicName(s string) (PublicName, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return PublicName{}, fmt.Errorf("public name is empty")
	}
	var p PublicName
	hostport := in
	if i := strings.Index(in, "://"); i >= 0 {
		u, err := url.Parse(in)
		if err != nil {
			return PublicName{}, fmt.Errorf("public name %s: %w", quote(in), err)
		}
		p.Scheme = strings.ToLower(u.Scheme)
		if p.Scheme != "http" && p.Scheme != "https" {
			return PublicName{}, fmt.Errorf("public name %s: the scheme must be http or https", quote(in))
		}
		if u.User != nil || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			return PublicName{}, fmt.Errorf("public name %s: give only a scheme, a host and a port", quote(in))
		}
		hostport = u.Host
	}
	host := hostport
	if h, port, err := net.SplitHostPort(hostport); err == nil {
		n, perr := strconv.Atoi(port)
		if perr != nil || n < 1 || n > 65535 {
			return PublicName{}, fmt.Errorf("public name %s: bad port %s", quote(in), quote(port))
		}
		host, p.Port = h, strconv.Itoa(n)
	} else if strings.Count(hostport, ":") == 1 || strings.HasPrefix(hostport, "[") && !strings.HasSuffix(hostport, "]") {
		return PublicName{}, fmt.Errorf("public name %s: %v", quote(in), err)
	}
	p.Host = normalHost(host)
	if p.Host == "" {
		return PublicName{}, fmt.Errorf("public name %s has no host", quote(in))
	}
	if net.ParseIP(p.Host) == nil {
		for _, label := range strings.Split(p.Host, ".") {
			if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
				return PublicName{}, fmt.Errorf("public name %s: %s is not a host name or an IP address", quote(in), quote(p.Host))
			}
		}
	}
	return p, nil
}

// String is the name as it was configured, normalized.
func (p PublicName) String() string {
	hp := p.Host
	if strings.Contains(hp, ":") {
		hp = "[" + hp + "]"
	}
	if p.Port != "" {
		hp = net.JoinHostPort(p.Host, p.Port)
	}
	if p.Scheme != "" {
		return p.Scheme + "://" + hp
	}
	return hp
}

// matches reports whether a request's Host (already split and
// normalized) names p. A name without a port matches any port; with one,
// the Host must carry it (or none, if it is the default port of p's
// scheme).
func (p PublicName) matches(host, port string) bool {
	if host != p.Host {
		return false
	}
	if p.Port == "" || port == p.Port {
		return true
	}
	return port == "" && (p.Scheme == "https" && p.Port == "443" || p.Scheme != "https" && p.Port == "80")
}
