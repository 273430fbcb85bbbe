package tool

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Which addresses web_fetch refuses to connect to unless private
// addresses are allowed: every address that is not a public unicast
// one, so that a model (or a page it was told to read) cannot reach the
// metis server itself, the machine's other services, the LAN, or a
// cloud's metadata service (169.254.169.254, 100.100.100.200). The check
// runs on the address actually dialled, after DNS resolution, for the
// first request and for every redirect (net.Dialer.Control), so neither
// a name resolving to such an address nor a redirect to one gets
// through, and a name that resolves differently on the second lookup
// (DNS rebinding) is checked on the address used.

var refusedPrefixes = []struct {
	p   netip.Prefix
	why string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address, where cloud metadata services also live"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
}

// Prefixes of IPv6 addresses that carry an IPv4 address (checked in
// turn): NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48) and the
// deprecated IPv4-compatible form (::a.b.c.d) in the last 32 bits; 6to4
// (2002::/16) in bits 16 to 48.
var (
	nat64       = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48"), netip.MustParsePrefix("::/96")}
	sixToFour   = netip.MustParsePrefix("2002::/16")
	teredo      = netip.MustParsePrefix("2001::/32")
	broadcastV4 = netip.MustParseAddr("255.255.255.255")
)

// addrRefused says why a connects where web_fetch may not go by
// default; "" if it may.
func addrRefused(a netip.Addr) string {
	a = a.WithZone("")
	if a.Is4In6() {
		a = a.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	}
	switch {
	case !a.IsValid():
		return "not a valid address"
	case a.IsLoopback():
		return "a loopback address (this machine)"
	case a.IsUnspecified():
		return "the unspecified address (this machine)"
	case a.IsLinkLocalUnicast():
		return "a link-local address (the local network, or a cloud metadata service)"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast(), a == broadcastV4:
		return "a multicast or broadcast address"
	case a.IsPrivate():
		return "a private address (the local network)"
	}
	for _, r := range refusedPrefixes {
		if r.p.Contains(a) {
			return r.why
		}
	}
	if a.Is6() {
		b := a.As16()
		for _, p := range nat64 {
			if p.Contains(a) {
				if why := addrRefused(netip.AddrFrom4([4]byte(b[12:16]))); why != "" {
					return why + ", inside an IPv6 address"
				}
			}
		}
		if sixToFour.Contains(a) {
			if why := addrRefused(netip.AddrFrom4([4]byte(b[2:6]))); why != "" {
				return why + ", inside a 6to4 address"
			}
		}
		if teredo.Contains(a) {
			// The client's IPv4 address, inverted, in the last 32 bits.
			v4 := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
			if why := addrRefused(netip.AddrFrom4(v4)); why != "" {
				return why + ", inside a Teredo address"
			}
		}
	}
	return ""
}

// errRefusedAddr is a connection web_fetch refused to make.
type errRefusedAddr struct {
	addr netip.Addr
	why  string
}

func (e *errRefusedAddr) Error() string {
	return fmt.Sprintf("%s is %s; web_fetch reaches public addresses only (the web-fetch-allow-private setting allows the others)", e.addr, e.why)
}

// dialControl returns a net.Dialer.Control that refuses the addresses
// above, unless allow says otherwise for the address and port.
func dialControl(allow func(netip.AddrPort) bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			host, _, serr := net.SplitHostPort(address)
			a, aerr := netip.ParseAddr(host)
			if serr != nil || aerr != nil {
				return fmt.Errorf("web_fetch: cannot check the address %q", address)
			}
			ap = netip.AddrPortFrom(a, 0)
		}
		if allow != nil && allow(ap) {
			return nil
		}
		if why := addrRefused(ap.Addr()); why != "" {
			return &errRefusedAddr{addr: ap.Addr().WithZone(""), why: why}
		}
		return nil
	}
}
