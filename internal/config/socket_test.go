package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSocketSetting: the socket is <home>/metis.sock unless config.yaml
// or --socket says otherwise; "off" and "" turn it off, a flag beats the
// file, and a relative path is made absolute.
func TestSocketSetting(t *testing.T) {
	wd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		file string
		args []string
		want func(home string) string
	}{
		"default":              {"", nil, func(h string) string { return filepath.Join(h, SocketName) }},
		"flag off":             {"", []string{"--socket=off"}, func(string) string { return "" }},
		"flag empty":           {"", []string{"--socket="}, func(string) string { return "" }},
		"flag path":            {"", []string{"--socket", "/run/user/1/m.sock"}, func(string) string { return "/run/user/1/m.sock" }},
		"flag relative":        {"", []string{"--socket", "m.sock"}, func(string) string { return filepath.Join(wd, "m.sock") }},
		"file off":             {"socket: off\n", nil, func(string) string { return "" }},
		"file empty":           {"socket: ''\n", nil, func(string) string { return "" }},
		"file path":            {"socket: /tmp/x/m.sock\n", nil, func(string) string { return "/tmp/x/m.sock" }},
		"flag beats file":      {"socket: off\n", []string{"--socket", "/a/m.sock"}, func(string) string { return "/a/m.sock" }},
		"flag off beats file":  {"socket: /a/m.sock\n", []string{"--socket=off"}, func(string) string { return "" }},
		"home follows --home":  {"", []string{"--home", "{home}/sub"}, func(h string) string { return filepath.Join(h, "sub", SocketName) }},
		"unclean path cleaned": {"", []string{"--socket", "/a//b/../m.sock"}, func(string) string { return "/a/m.sock" }},
	} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			writeConfig(t, home, c.file)
			args := []string{"--home", home}
			for _, a := range c.args {
				args = append(args, strings.ReplaceAll(a, "{home}", home))
			}
			cfg, err := Load(args)
			if err != nil {
				t.Fatal(err)
			}
			if want := c.want(home); cfg.Socket != want {
				t.Fatalf("socket %q, want %q", cfg.Socket, want)
			}
		})
	}
	if _, err := Load([]string{"--home", t.TempDir(), "--socket", "a\x00b"}); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("a NUL in the path: %v", err)
	}
}
