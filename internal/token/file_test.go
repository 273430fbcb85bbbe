package token

import (
	"errors"
	"io/fs"
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

func TestForClient(t *testing.T) {
	home := t.TempDir()
	if _, _, err := Ensure(filepath.Join(home, FileName)); err != nil {
		t.Fatal(err)
	}
	homeTok, _ := Read(filepath.Join(home, FileName))
	file := writeFile(t, secret, 0o600)
	t.Setenv(EnvVar, "")
	os.Unsetenv(EnvVar)

	cases := []struct {
		url, file, env string
		want           string
	}{
		{"http://127.0.0.1:8421", "", "", ""},        // loopback: none
		{"http://localhost:8421", "", "", ""},        // loopback name: none
		{"http://[::1]:8421", "", "", ""},            // IPv6 loopback: none
		{"http://10.1.2.3:8421", "", "", homeTok},    // network: the home file
		{"https://127.0.0.1:8421", "", "", homeTok},  // TLS: the home file
		{"http://metis.example:80", "", "", homeTok}, // a name: the home file
		{"http://127.0.0.1:8421", file, "", secret},  // the flag always wins
		{"http://10.1.2.3:8421", file, "envtoken-0123456789", secret},
		{"http://127.0.0.1:8421", "", "envtoken-0123456789", "envtoken-0123456789"}, // the env is sent when set
		{"http://10.1.2.3:8421", "", "envtoken-0123456789", "envtoken-0123456789"},
	}
	for _, c := range cases {
		if c.env != "" {
			t.Setenv(EnvVar, c.env)
		} else {
			os.Unsetenv(EnvVar)
		}
		got, err := ForClient(c.url, c.file, home)
		if err != nil || got != c.want {
			t.Errorf("ForClient(%s, file=%q, env=%q) = %q, %v; want %q", c.url, c.file, c.env, got, err, c.want)
		}
	}
	os.Unsetenv(EnvVar)
	if got, err := ForClient("http://10.1.2.3:8421", "", t.TempDir()); got != "" || err != nil {
		t.Errorf("no home token file: %q, %v", got, err)
	}
	t.Setenv(EnvVar, "short")
	if _, err := ForClient("http://127.0.0.1:1", "", home); err == nil || !strings.Contains(err.Error(), EnvVar) {
		t.Errorf("a bad $%s: %v", EnvVar, err)
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
