package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSettingsOffConfinesNothing: the sandbox turned off gives a policy
// that only drops capabilities.
func TestSettingsOffConfinesNothing(t *testing.T) {
	if p := (Settings{Off: true}).Call("/ws", "/tmp/x", true); p.Confine || len(p.Writable) > 0 {
		t.Fatalf("policy %+v", p)
	}
}

// TestSettingsCall: a confined call writes its workspace, its temporary
// directory, the cache directory and the configured additions; hides
// the default credential paths and the configured ones; has the network
// only when the setting or the call allows it.
func TestSettingsCall(t *testing.T) {
	if !Probe(true).Available {
		t.Skip("no Landlock here: every policy is unconfined")
	}
	cache := filepath.Join(t.TempDir(), "cache")
	s := Settings{Writable: []string{"/extra"}, Hidden: []string{"/home/me/.metis"}, CacheDir: cache}
	p := s.Call("/ws", "/tmp/call", false)
	if !p.Confine || p.Network {
		t.Fatalf("policy %+v", p)
	}
	for _, w := range []string{"/ws", "/tmp/call", cache, "/extra"} {
		if !slices.Contains(p.Writable, w) {
			t.Errorf("%s not writable: %v", w, p.Writable)
		}
	}
	if fi, err := os.Stat(cache); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("cache directory not made 0700: %v %v", fi, err)
	}
	home, _ := os.UserHomeDir()
	for _, h := range []string{"/home/me/.metis", filepath.Join(home, ".ssh"), filepath.Join(home, ".aws")} {
		if !slices.Contains(p.Hidden, h) {
			t.Errorf("%s not hidden: %v", h, p.Hidden)
		}
	}
	if !s.Call("/ws", "/t", true).Network || !(Settings{Network: true}).Call("/ws", "/t", false).Network {
		t.Error("the network is not allowed by the call or by the setting")
	}
}

// TestEnviron: TMPDIR is always the call's; a confined call's caches
// point into the cache directory unless the environment names them.
func TestEnviron(t *testing.T) {
	s := Settings{CacheDir: "/c"}
	env := []string{"PATH=/bin", "TMPDIR=/tmp", "GOCACHE=/mine"}
	got := s.Environ(Policy{Confine: true}, env, "/call")
	for _, want := range []string{"PATH=/bin", "TMPDIR=/call", "GOCACHE=/mine", "npm_config_cache=/c/npm", "XDG_CACHE_HOME=/c/xdg"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s missing from %q", want, got)
		}
	}
	if slices.Contains(got, "TMPDIR=/tmp") {
		t.Errorf("the server's TMPDIR kept: %q", got)
	}
	got = s.Environ(Policy{}, []string{"PATH=/bin"}, "/call")
	if !slices.Equal(got, []string{"PATH=/bin", "TMPDIR=/call"}) {
		t.Errorf("unconfined: %q", got)
	}
}

func TestParsePaths(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	got, err := ParsePaths(" /a/b/ , ~/.cache/x,,~ ")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/a/b", filepath.Join(home, ".cache/x"), home}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"rel/path", "~user/x", "/a\x00b", "./x"} {
		if _, err := ParsePaths(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParsePaths(f *testing.F) {
	for _, s := range []string{"/a,/b", "~/x", "", ",,", "rel", "/\x00", "~", "/a/../b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		paths, err := ParsePaths(s)
		if err != nil {
			return
		}
		for _, p := range paths {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
				t.Fatalf("%q gave %q", s, p)
			}
		}
	})
}

// TestPolicyRoundTrip: the stage reads exactly what the server encoded,
// and refuses anything else.
func TestPolicyRoundTrip(t *testing.T) {
	p := Policy{Confine: true, Writable: []string{"/ws", "/t"}, Hidden: []string{"/h"}, Network: true}
	got, err := decodePolicy(p.Encode())
	if err != nil || !slices.Equal(got.Writable, p.Writable) || !slices.Equal(got.Hidden, p.Hidden) || got.Confine != p.Confine || got.Network != p.Network {
		t.Fatalf("%+v, %v", got, err)
	}
	for _, bad := range []string{"", "{", `{"confine": "yes"}`, `{"confine": true, "writeable": []}`} {
		if _, err := decodePolicy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStatus(t *testing.T) {
	for _, c := range []struct {
		abi       int
		available bool
		reason    bool
	}{{0, false, true}, {3, false, true}, {4, true, true}, {5, true, true}, {6, true, false}, {7, true, false}} {
		s := statusFor(c.abi, nil)
		if s.Available != c.available || (s.Reason != "") != c.reason || s.ABI != c.abi {
			t.Errorf("ABI %d: %+v", c.abi, s)
		}
	}
	if s := statusFor(0, os.ErrPermission); s.Available || s.Reason == "" {
		t.Errorf("error: %+v", s)
	}
	on := Status{Enabled: true, Available: true, ABI: 7}
	if !on.Active() || !strings.Contains(on.String(), "ABI 7") {
		t.Errorf("%+v: %s", on, on)
	}
	off := Status{Enabled: false, Available: true, ABI: 7}
	if off.Active() || !strings.Contains(off.String(), "OFF") {
		t.Errorf("%+v: %s", off, off)
	}
	un := Status{Enabled: true, Reason: "no Landlock"}
	if un.Active() || !strings.Contains(un.String(), "unavailable (no Landlock)") {
		t.Errorf("%+v: %s", un, un)
	}
}
