package token

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestEnsureCreatesAPrivateFileOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "home", FileName)
	tok, created, err := Ensure(path)
	if err != nil || !created {
		t.Fatalf("Ensure: %v created=%v", err, created)
	}
	if len(tok) != 43 {
		t.Fatalf("generated token has %d characters, want 43", len(tok))
	}
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want a regular 0600 file", st.Mode())
	}
	again, created, err := Ensure(path)
	if err != nil || created || again != tok {
		t.Fatalf("second Ensure: created=%v err=%v same=%v", created, err, again == tok)
	}
	other, _, _ := Ensure(filepath.Join(t.TempDir(), FileName))
	if other == tok {
		t.Fatal("two generated tokens are equal")
	}
}

func writeFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

const secret = "s3cret-token-value-0123456789"

func TestReadRefusesUnsafeFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		path string
		want string
	}{
		"group readable": {writeFile(t, secret, 0o640), "group or others may read it"},
		"world readable": {writeFile(t, secret, 0o604), "group or others may read it"},
		"directory":      {dir, "not a regular file"},
		"fifo":           {fifo, "not a regular file"},
		"device":         {"/dev/null", "not a regular file"},
		"huge":           {writeFile(t, strings.Repeat("a", 5000), 0o600), "at most 4096 bytes"},
		"empty":          {writeFile(t, " \n", 0o600), "empty"},
		"short":          {writeFile(t, "abc\n", 0o600), "at least 16"},
		"two words":      {writeFile(t, secret+" "+secret, 0o600), "printable ASCII"},
	} {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := Read(c.path); done <- err }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Read blocked")
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Fatalf("Read: %v, want an error naming the file and saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error quotes the token: %v", err)
			}
		})
	}
	if _, err := Read(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestEnsureRefusesAnUnsafeExistingFile(t *testing.T) {
	p := writeFile(t, secret, 0o644)
	if _, _, err := Ensure(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("Ensure on a 0644 file: %v", err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != secret {
		t.Fatal("Ensure replaced an existing token file")
	}
}

func TestReadAcceptsAPrivateFileAndASymlinkToOne(t *testing.T) {
	p := writeFile(t, "\n "+secret+"\r\n", 0o600)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, link} {
		if tok, err := Read(path); err != nil || tok != secret {
			t.Fatalf("Read(%s) = %q, %v", path, tok, err)
		}
	}
	if tok, err := Read(writeFile(t, secret, 0o400)); err != nil || tok != secret {
		t.Fatalf("0400 file: %q, %v", tok, err)
	}
}

// TestForClient: the flag wins, then $METIS_TOKEN; the home's token
// goes only to an https address its server recorded; nothing is sent
// over plain http to a host that is not loopback (an error, whatever
// the token's source).
func TestForClient(t *testing.T) {
	home := t.TempDir()
	if _, _, err := Ensure(filepath.Join(home, FileName)); err != nil {
		t.Fatal(err)
	}
	homeTok, _ := Read(filepath.Join(home, FileName))
	addrs := append(HostAddresses("https", "127.0.0.1", "8421", nil),
		Address{Scheme: "https", Host: "metis.example"},         // a public name, any port
		Address{Host: "proxy.example", Port: "443"},             // no scheme: http or https
		Address{Scheme: "http", Host: "10.1.2.3", Port: "8421"}) // a LAN address without TLS
	if err := WriteAddresses(home, addrs); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, secret, 0o600)
	t.Setenv(EnvVar, "")
	os.Unsetenv(EnvVar)

	const refused = "\x00refused"
	cases := []struct {
		url, file, env string
		want           string
	}{
		{"http://127.0.0.1:8421", "", "", ""},           // loopback http: never unasked
		{"http://localhost:8421", "", "", ""},           // loopback name: none
		{"https://127.0.0.1:8421", "", "", homeTok},     // the home's server over TLS
		{"https://LOCALHOST.:8421/", "", "", homeTok},   // the same, spelled otherwise
		{"https://127.0.0.1:8422", "", "", ""},          // another port: another server
		{"https://metis.example", "", "", homeTok},      // a public name
		{"https://metis.example:9443", "", "", homeTok}, // a public name without a port
		{"https://proxy.example", "", "", homeTok},      // a public name without a scheme
		{"https://evil.example:8421", "", "", ""},       // not the home's server
		{"https://10.1.2.3:8421", "", "", ""},           // recorded as http only
		{"http://10.1.2.3:8421", "", "", refused},       // the home's, but plain http
		{"http://10.9.9.9:8421", "", "", ""},            // not the home's: nothing to refuse
		{"http://127.0.0.1:8421", file, "", secret},     // the flag always wins
		{"https://evil.example", file, "", secret},      // given by the user: sent
		{"http://10.1.2.3:8421", file, "envtoken-0123456789", refused},
		{"http://127.0.0.1:8421", "", "envtoken-0123456789", "envtoken-0123456789"}, // the env is sent when set
		{"https://evil.example", "", "envtoken-0123456789", "envtoken-0123456789"},
		{"http://10.1.2.3:8421", "", "envtoken-0123456789", refused},
		{"http://metis.example:80", "", "envtoken-0123456789", refused},
	}
	for _, c := range cases {
		if c.env != "" {
			t.Setenv(EnvVar, c.env)
		} else {
			os.Unsetenv(EnvVar)
		}
		got, err := ForClient(c.url, c.file, home)
		if c.want == refused {
			if got != "" || err == nil || !strings.Contains(err.Error(), "over plain http") || strings.Contains(err.Error(), secret) {
				t.Errorf("ForClient(%s, file=%q, env=%q) = %q, %v; want a refusal", c.url, c.file, c.env, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ForClient(%s, file=%q, env=%q) = %q, %v; want %q", c.url, c.file, c.env, got, err, c.want)
		}
	}
	os.Unsetenv(EnvVar)
	if got, err := ForClient("https://127.0.0.1:8421", "", t.TempDir()); got != "" || err != nil {
		t.Errorf("no home token file: %q, %v", got, err)
	}
	// No addresses file (no server runs on the home): nothing.
	if err := RemoveAddresses(home); err != nil {
		t.Fatal(err)
	}
	if got, err := ForClient("https://127.0.0.1:8421", "", home); got != "" || err != nil {
		t.Errorf("no addresses file: %q, %v", got, err)
	}
	t.Setenv(EnvVar, "short")
	if _, err := ForClient("http://127.0.0.1:1", "", home); err == nil || !strings.Contains(err.Error(), EnvVar) {
		t.Errorf("a bad $%s: %v", EnvVar, err)
	}
}

// TestAddressesFile: written whole with mode 0600, read back; a file
// others may write to is refused (it could send the token elsewhere).
func TestAddressesFile(t *testing.T) {
	home := t.TempDir()
	want := []Address{{Scheme: "https", Host: "127.0.0.1", Port: "8421"}, {Scheme: "unix", Path: "/x/metis.sock"}}
	if err := WriteAddresses(home, want); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, AddressesFile)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("addresses file: %v, %v", st, err)
	}
	got, err := ReadAddresses(home)
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if err := os.Chmod(path, 0o622); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAddresses(home); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("a file others may write: %v", err)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

// TestHostAddresses: a listener on every interface serves the loopback
// names and the interfaces' addresses; one on loopback also serves
// localhost; one on an address serves that address.
func TestHostAddresses(t *testing.T) {
	for _, c := range []struct {
		host  string
		hosts []string
	}{
		{"0.0.0.0", []string{"localhost", "127.0.0.1", "::1", "192.0.2.5"}},
		{"::", []string{"localhost", "127.0.0.1", "::1", "192.0.2.5"}},
		{"", []string{"localhost", "127.0.0.1", "::1", "192.0.2.5"}},
		{"127.0.0.1", []string{"127.0.0.1", "localhost"}},
		{"192.0.2.9", []string{"192.0.2.9"}},
	} {
		var got []string
		for _, a := range HostAddresses("https", c.host, "8421", []string{"192.0.2.5", "127.0.0.1"}) {
			if a.Scheme != "https" || a.Port != "8421" {
				t.Fatalf("%s: %+v", c.host, a)
			}
			got = append(got, a.Host)
		}
		if strings.Join(got, " ") != strings.Join(c.hosts, " ") {
			t.Errorf("HostAddresses(%q) hosts %v, want %v", c.host, got, c.hosts)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", " ", secret, " " + secret + "\n", "a b", "\x00" + secret, "é" + secret, strings.Repeat("x", 16)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		if err != nil {
			if tok != "" {
				t.Fatalf("error with a token")
			}
			if tr := strings.TrimSpace(s); len(tr) >= MinLength && !strings.Contains(tr, " ") && strings.Contains(err.Error(), tr) {
				t.Fatalf("the error quotes the input: %v", err)
			}
			return
		}
		if len(tok) < MinLength || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			t.Fatalf("accepted %q", tok)
		}
		if tok != strings.TrimSpace(s) {
			t.Fatalf("Parse(%q) = %q", s, tok)
		}
	})
}

// FuzzServes: any server URL and recorded address compare without
// panic; nothing matches an empty list; a recorded https address
// matches its own URL.
func FuzzServes(f *testing.F) {
	for _, s := range [][3]string{{"https://127.0.0.1:8421", "127.0.0.1", "8421"}, {"unix:///x/metis.sock", "", ""},
		{"https://[::1]:1/", "::1", "1"}, {"http://a", "A.", ""}, {"%zz", "x", "y"}, {"https://h:0", "h", "0"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, u, host, port string) {
		if Serves(nil, u) {
			t.Fatalf("%q matches no address", u)
		}
		Serves([]Address{{Scheme: "https", Host: host, Port: port}, {Host: host}, {Scheme: "unix", Path: host}}, u)
		if strings.ContainsAny(host, "/:[]@?#%") || host == "" || port == "" || strings.Trim(port, "0123456789") != "" {
			return
		}
		own := "https://" + host + ":" + port
		if _, err := url.Parse(own); err == nil && !Serves([]Address{{Scheme: "https", Host: host, Port: port}}, own) {
			t.Fatalf("%s does not match its own address", own)
		}
	})
}
