package token

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// AddressesFile is the file, beside <home>/token, in which the server
// running on the home records the addresses it serves. A client sends
// <home>/token only to a server at one of them: the token belongs to
// that server, not to whatever --server or $METIS_SERVER names.
const AddressesFile = "addresses.json"

// maxAddressesSize bounds the addresses file a client reads.
const maxAddressesSize = 64 << 10

// Address is one way to reach a server.
type Address struct {
	// Scheme is "http", "https" or "unix"; "" (a public name given
	// without a scheme) matches http and https.
	Scheme string `json:"scheme,omitempty"`
	// Host is a host name or IP address: lower case, without brackets
	// or a trailing dot.
	Host string `json:"host,omitempty"`
	// Port is the TCP port; "" matches any (a public name given
	// without a port).
	Port string `json:"port,omitempty"`
	// Path is a unix socket's absolute path.
	Path string `json:"path,omitempty"`
}

type addressesDoc struct {
	Addresses []Address `json:"addresses"`
}

// WriteAddresses records addrs as the addresses the server on home
// serves: a JSON file of mode 0600 written whole to a temporary file in
// home, synced, then renamed over AddressesFile, so a client never reads
// half of it.
func WriteAddresses(home string, addrs []Address) error {
	b, err := json.MarshalIndent(addressesDoc{Addresses: addrs}, "", "  ")
	if err != nil {
		return fmt.Errorf("addresses file: %w", err)
	}
	f, err := os.CreateTemp(home, "."+AddressesFile+".*")
	if err != nil {
		return fmt.Errorf("addresses file: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Chmod(0o600) // CreateTemp makes it 0600 already; whatever the umask
	serr := f.Sync()
	if err := errors.Join(werr, cerr, serr, f.Close()); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("addresses file %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(home, AddressesFile)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("addresses file: %w", err)
	}
	return nil
}

// RemoveAddresses removes the addresses file of home (the server
// stops); a missing file is no error.
func RemoveAddresses(home string) error {
	err := os.Remove(filepath.Join(home, AddressesFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("addresses file: %w", err)
	}
	return nil
}

// ReadAddresses returns the addresses recorded in home. The file must be
// a regular file of this user's that nobody else may write to (whoever
// could write it could send this user's token elsewhere); a missing file
// is an error wrapping fs.ErrNotExist.
func ReadAddresses(home string) ([]Address, error) {
	path := filepath.Join(home, AddressesFile)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("addresses file %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("addresses file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("addresses file %s is not a regular file", path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("addresses file %s belongs to uid %d, not to this user", path, sys.Uid)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("addresses file %s is writable by group or others", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxAddressesSize+1))
	if err != nil {
		return nil, fmt.Errorf("addresses file %s: %w", path, err)
	}
	if len(b) > maxAddressesSize {
		return nil, fmt.Errorf("addresses file %s is larger than %d bytes", path, maxAddressesSize)
	}
	var doc addressesDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("addresses file %s: %w", path, err)
	}
	return doc.Addresses, nil
}

// Serves reports whether serverURL (http://, https:// or unix://) is
// one of addrs: the same scheme (an address without one takes http and
// https), host and port (an address without a port takes any), or the
// same socket file.
func Serves(addrs []Address, serverURL string) bool {
	if p, ok := socketPath(serverURL); ok {
		want := samePath(p)
		for _, a := range addrs {
			if a.Scheme == "unix" && a.Path != "" && samePath(a.Path) == want {
				return true
			}
		}
		return false
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return false
	}
	host, port := NormalHost(u.Hostname()), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	for _, a := range addrs {
		if a.Scheme == "unix" || a.Scheme != "" && a.Scheme != scheme {
			continue
		}
		if NormalHost(a.Host) == host && (a.Port == "" || a.Port == port) {
			return true
		}
	}
	return false
}

// NormalHost is a host as Address keeps it: lower case, without
// brackets or a trailing dot.
func NormalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// samePath is path made absolute with its symbolic links resolved where
// they can be, to compare two names of one socket.
func samePath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// HostAddresses is what a TCP listener bound to host:port serves, for
// WriteAddresses: scheme with host, and, when host is a loopback or
// unspecified address, localhost and the loopback addresses; an
// unspecified address (every interface) adds ifaceIPs too.
func HostAddresses(scheme, host, port string, ifaceIPs []string) []Address {
	host = NormalHost(host)
	var hosts []string
	ip := net.ParseIP(host)
	switch {
	case host == "" || ip != nil && ip.IsUnspecified():
		hosts = append([]string{"localhost", "127.0.0.1", "::1"}, ifaceIPs...)
	case IsLoopbackHost(host):
		hosts = []string{host, "localhost"}
	default:
		hosts = []string{host}
	}
	var out []Address
	seen := map[string]bool{}
	for _, h := range hosts {
		if h = NormalHost(h); h != "" && !seen[h] {
			seen[h] = true
			out = append(out, Address{Scheme: scheme, Host: h, Port: port})
		}
	}
	return out
}
