package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultHidden are the paths, relative to the user's home directory,
// that a confined command cannot read besides the metis home: where
// credentials usually live (SSH and GnuPG keys, cloud, container and
// cluster credentials, git and package-registry tokens, the GitHub CLI's
// token).
var DefaultHidden = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker",
	".netrc", ".git-credentials", ".config/gh", ".password-store", ".pypirc",
	".cargo/credentials", ".cargo/credentials.toml", ".npmrc",
}

// Settings are the sandbox's settings (config.yaml and `metis serve`
// flags: sandbox, sandbox-writable, sandbox-hidden, sandbox-network).
// The zero value is the careful default: on, no network, nothing
// writable beyond the workspace, the call's temporary directory and the
// sandbox's cache directory.
type Settings struct {
	// Off turns the sandbox off: commands run unconfined, with the
	// server's rights (minus the capabilities that reach other
	// processes, which every tool process drops).
	Off bool
	// Writable are more paths commands may write (absolute).
	Writable []string
	// Hidden are more paths commands can neither read nor write
	// (absolute), besides DefaultHidden under the user's home.
	Hidden []string
	// Network lets every command bind and connect TCP sockets.
	Network bool
	// CacheDir is the writable directory the tool caches are pointed at
	// in the sandbox (GOCACHE, npm_config_cache, XDG_CACHE_HOME), shared
	// by the confined commands and apart from the user's own caches;
	// "" is DefaultCacheDir().
	CacheDir string
}

// DefaultCacheDir is the sandbox's cache directory:
// <user cache dir>/metis-sandbox (~/.cache/metis-sandbox).
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "metis-sandbox")
}

// Policy is what the processes of one shell call may do; the exec stage
// enforces it. It travels to the stage as JSON on the command line (it
// holds paths only).
type Policy struct {
	// Confine enters the Landlock domain; without it the stage only
	// drops the capabilities that reach other processes.
	Confine bool `json:"confine"`
	// Writable are the hierarchies the command may write (and read):
	// the workspace, the call's temporary directory, the caches.
	Writable []string `json:"writable,omitempty"`
	// Hidden are the hierarchies it can neither read nor write.
	Hidden []string `json:"hidden,omitempty"`
	// Network lets it bind and connect TCP sockets.
	Network bool `json:"network,omitempty"`
}

// Call returns the policy of one shell call in workspace with its
// temporary directory tmp; network allows TCP for this call (a
// permission rule may allow it) besides the setting. The call is
// confined unless the sandbox is off or the kernel cannot enforce it.
func (s Settings) Call(workspace, tmp string, network bool) Policy {
	if s.Off || !Probe(true).Available {
		return Policy{}
	}
	p := Policy{Confine: true, Network: network || s.Network}
	p.Writable = append(p.Writable, workspace, tmp)
	if c := s.cacheDir(); c != "" && os.MkdirAll(c, 0o700) == nil {
		p.Writable = append(p.Writable, c)
	}
	p.Writable = append(p.Writable, s.Writable...)
	if home, err := os.UserHomeDir(); err == nil {
		for _, h := range DefaultHidden {
			p.Hidden = append(p.Hidden, filepath.Join(home, h))
		}
	}
	p.Hidden = append(p.Hidden, s.Hidden...)
	return p
}

func (s Settings) cacheDir() string {
	if s.CacheDir != "" {
		return s.CacheDir
	}
	return DefaultCacheDir()
}

// Environ returns env (the command's environment) for a call with
// policy p and temporary directory tmp: TMPDIR is tmp, and a confined
// call's tool caches point into the sandbox's cache directory unless
// env already names them (GOCACHE, npm_config_cache, XDG_CACHE_HOME).
func (s Settings) Environ(p Policy, env []string, tmp string) []string {
	out := setEnv(env, "TMPDIR", tmp, true)
	if !p.Confine {
		return out
	}
	if c := s.cacheDir(); c != "" {
		out = setEnv(out, "GOCACHE", filepath.Join(c, "go-build"), false)
		out = setEnv(out, "npm_config_cache", filepath.Join(c, "npm"), false)
		out = setEnv(out, "XDG_CACHE_HOME", filepath.Join(c, "xdg"), false)
	}
	return out
}

// setEnv sets name=value in env, replacing an existing entry only when
// replace is set.
func setEnv(env []string, name, value string, replace bool) []string {
	out := make([]string, 0, len(env)+1)
	found := false
	for _, kv := range env {
		if n, _, _ := strings.Cut(kv, "="); n == name {
			if found || replace {
				continue
			}
			found = true
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, name+"="+value)
	}
	return out
}

// Encode returns p as the exec stage reads it.
func (p Policy) Encode() string {
	b, _ := json.Marshal(p) // a struct of strings and bools always encodes
	return string(b)
}

// decodePolicy reads an encoded policy strictly.
func decodePolicy(s string) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	return p, nil
}

// ParsePaths parses a setting listing paths, separated by commas: each
// absolute, or starting with "~/" for the user's home directory.
func ParsePaths(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if strings.ContainsRune(p, 0) {
			return nil, errors.New("a path cannot hold a NUL byte")
		}
		if p == "~" || strings.HasPrefix(p, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			p = filepath.Join(home, p[1:])
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%q is not an absolute path (or one starting with ~/)", p)
		}
		out = append(out, filepath.Clean(p))
	}
	return out, nil
}
