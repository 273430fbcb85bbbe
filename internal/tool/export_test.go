package tool

import "net/netip"

// WebFetchAllowing returns a web_fetch that refuses what the default
// refuses except connections to the given port (a test server's, on
// loopback), so that tests can check the refusal of everything else.
func WebFetchAllowing(port uint16) WebFetch {
	return WebFetch{allow: func(ap netip.AddrPort) bool { return ap.Port() == port }}
}

// AddrRefused exposes the address check to the package's tests.
func AddrRefused(a netip.Addr) string { return addrRefused(a) }
