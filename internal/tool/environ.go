package tool

import (
	"os"
	"strings"
)

// DefaultPath is the PATH a tool process gets when the server has none.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// allowedEnv names the variables of the server's environment that tool
// processes inherit: what a shell and ordinary commands need to run, and
// nothing else. LC_* (every locale category) is allowed by prefix.
var allowedEnv = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true,
	"LANG": true, "LANGUAGE": true, "TERM": true, "TMPDIR": true, "TZ": true,
}

// secretPrefixes and secretWords mark variable names that are never
// passed to a tool, whatever the allow-list says: provider credentials,
// metis's own settings, and anything named like a secret.
var (
	secretPrefixes = []string{"ANTHROPIC_", "OPENAI_", "METIS_"}
	secretWords    = map[string]bool{
		"KEY": true, "APIKEY": true, "TOKEN": true, "SECRET": true, "SECRETS": true,
		"PASSWORD": true, "PASSWD": true, "PASS": true, "CREDENTIAL": true,
		"CREDENTIALS": true, "AUTH": true, "COOKIE": true, "SESSION": true, "PRIVATE": true,
	}
)

// IsSecretEnv reports whether the variable name looks like it holds a
// secret: it starts with ANTHROPIC_, OPENAI_ or METIS_, or one of its
// "_"-separated words (case-insensitive) is KEY, APIKEY, TOKEN, SECRET,
// PASSWORD, PASSWD, PASS, CREDENTIAL(S), AUTH, COOKIE, SESSION or
// PRIVATE. Such a variable never reaches a tool process, even when
// listed in the allow-list.
func IsSecretEnv(name string) bool {
	up := strings.ToUpper(name)
	for _, p := range secretPrefixes {
		if strings.HasPrefix(up, p) || up == strings.TrimSuffix(p, "_") {
			return true
		}
	}
	for _, w := range strings.FieldsFunc(up, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if secretWords[w] {
			return true
		}
	}
	return false
}

// ToolEnviron returns the environment of a tool process, built from the
// server's environment (environ, as os.Environ returns it): the
// variables named in allowedEnv, every LC_* variable, and the names in
// extra (a configuration's additions), minus every name IsSecretEnv
// refuses. PATH is DefaultPath when the server has none. Entries keep
// environ's order; a name set twice keeps its last value.
func ToolEnviron(environ []string, extra []string) []string {
	allowed := func(name string) bool {
		if IsSecretEnv(name) {
			return false
		}
		if allowedEnv[name] || strings.HasPrefix(name, "LC_") {
			return true
		}
		for _, e := range extra {
			if e == name {
				return true
			}
		}
		return false
	}
	var out []string
	index := map[string]int{}
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || !allowed(name) {
			continue
		}
		if i, dup := index[name]; dup {
			out[i] = kv
			continue
		}
		index[name] = len(out)
		out = append(out, kv)
	}
	if _, ok := index["PATH"]; !ok {
		out = append(out, "PATH="+DefaultPath)
	}
	return out
}

// environ is the environment of a shell call: the server's own,
// filtered by ToolEnviron with the Shell's extra names.
func (s Shell) environ() []string { return ToolEnviron(os.Environ(), s.ExtraEnv) }
