package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/metis-agent/metis/protocol"
)

// Defaults and bounds of a server's settings.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultCallTimeout  = 5 * time.Minute
	maxStartTimeout     = 10 * time.Minute
	maxCallTimeout      = 24 * time.Hour
	maxServerName       = 32
)

// ServerConfig is one MCP server: a config.yaml entry or a session's.
type ServerConfig struct {
	Name  string
	Scope string // protocol.MCPScopeConfig or MCPScopeSession
	// stdio
	Command string
	Args    []string
	Env     map[string]string // resolved values
	Cwd     string
	// streamable HTTP
	URL     string
	Headers map[string]string // resolved values

	Disabled           bool
	StartTimeout       time.Duration
	CallTimeout        time.Duration
	TrustReadOnlyHints bool

	// Problem, when set, makes the entry invalid: the server is never
	// started and its status says why.
	Problem string
}

// Transport returns protocol.MCPTransportStdio or MCPTransportHTTP, ""
// for an entry with neither.
func (c ServerConfig) Transport() string {
	switch {
	case c.Command != "":
		return protocol.MCPTransportStdio
	case c.URL != "":
		return protocol.MCPTransportHTTP
	}
	return ""
}

// same reports whether two configurations describe the same server
// with the same settings (a reload keeps such a server running).
func (c ServerConfig) same(o ServerConfig) bool { return reflect.DeepEqual(c, o) }

// entry is one mcp_servers entry as written in config.yaml.
type entry struct {
	Command            string            `yaml:"command"`
	Args               []string          `yaml:"args"`
	Env                map[string]string `yaml:"env"`
	Cwd                string            `yaml:"cwd"`
	URL                string            `yaml:"url"`
	Headers            map[string]string `yaml:"headers"`
	Enabled            *bool             `yaml:"enabled"`
	StartTimeout       string            `yaml:"start_timeout"`
	CallTimeout        string            `yaml:"call_timeout"`
	TrustReadOnlyHints bool              `yaml:"trust_read_only_hints"`
}

// Parsed is config.yaml's mcp_servers section.
type Parsed struct {
	// Servers are the entries by name, invalid ones included (with
	// their Problem).
	Servers []ServerConfig
	// Err says why the section (or the file) could not be read at all;
	// the servers then stay as they were.
	Err string
}

// Getenv looks a variable up in metis's own environment.
type Getenv func(name string) (string, bool)

// ParseConfig reads the mcp_servers section of config.yaml's contents
// b (key mcp_servers or mcp-servers). Each entry is checked on its own:
// a bad one is returned with its Problem and does not affect the
// others. Values of env and headers may name variables of metis's
// environment as ${NAME}, so that tokens stay out of the file.
func ParseConfig(b []byte, getenv Getenv) Parsed {
	var raw map[string]yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return Parsed{Err: "config.yaml does not parse: " + err.Error()}
	}
	var section *yaml.Node
	for k, n := range raw {
		if strings.ReplaceAll(k, "-", "_") == "mcp_servers" {
			if section != nil {
				return Parsed{Err: "mcp_servers is set twice (mcp_servers and mcp-servers); set it once"}
			}
			section = &n
		}
	}
	if section == nil || section.Tag == "!!null" {
		return Parsed{}
	}
	if section.Kind != yaml.MappingNode {
		return Parsed{Err: "mcp_servers must be a mapping of server names to servers"}
	}
	var out Parsed
	seen := map[string]bool{}
	for i := 0; i+1 < len(section.Content); i += 2 {
		name := section.Content[i].Value
		c := parseEntry(name, section.Content[i+1], getenv)
		if seen[name] {
			c = ServerConfig{Name: name, Scope: protocol.MCPScopeConfig, Problem: "set twice"}
			for j := range out.Servers {
				if out.Servers[j].Name == name {
					out.Servers[j] = c
				}
			}
			continue
		}
		seen[name] = true
		out.Servers = append(out.Servers, c)
	}
	sort.Slice(out.Servers, func(i, j int) bool { return out.Servers[i].Name < out.Servers[j].Name })
	return out
}

// parseEntry decodes and checks one entry; a problem is kept on the
// result.
func parseEntry(name string, node *yaml.Node, getenv Getenv) ServerConfig {
	c := ServerConfig{Name: name, Scope: protocol.MCPScopeConfig}
	if err := checkConfigName(name); err != nil {
		c.Problem = err.Error()
		return c
	}
	var e entry
	if err := decodeStrict(node, &e); err != nil {
		c.Problem = err.Error()
		return c
	}
	c.Command, c.Args, c.Cwd, c.URL = e.Command, e.Args, e.Cwd, e.URL
	c.Disabled = e.Enabled != nil && !*e.Enabled
	c.TrustReadOnlyHints = e.TrustReadOnlyHints
	var err error
	if c.StartTimeout, err = duration("start_timeout", e.StartTimeout, DefaultStartTimeout, maxStartTimeout); err != nil {
		c.Problem = err.Error()
		return c
	}
	if c.CallTimeout, err = duration("call_timeout", e.CallTimeout, DefaultCallTimeout, maxCallTimeout); err != nil {
		c.Problem = err.Error()
		return c
	}
	if c.Env, err = resolve("env", e.Env, getenv); err != nil {
		c.Problem = err.Error()
		return c
	}
	if c.Headers, err = resolve("headers", e.Headers, getenv); err != nil {
		c.Problem = err.Error()
		return c
	}
	if err := check(c); err != nil {
		c.Problem = err.Error()
	}
	return c
}

// decodeStrict decodes node into v, refusing keys v does not have.
func decodeStrict(node *yaml.Node, v any) error {
	if node.Kind != yaml.MappingNode {
		return errors.New("want a mapping with command (stdio) or url (streamable HTTP)")
	}
	b, err := yaml.Marshal(node)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

func duration(key, s string, def, limit time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", key, err)
	}
	if d <= 0 || d > limit {
		return 0, fmt.Errorf("%s: %s is out of range (above 0, at most %s)", key, s, limit)
	}
	return d, nil
}

// checkConfigName refuses a config.yaml server name that would not be
// exactly the middle of its tools' names: letters, digits, '-' and
// single '_' between them, at most 32 bytes.
func checkConfigName(name string) error {
	if name == "" || len(name) > maxServerName {
		return fmt.Errorf("a server name has 1 to %d characters", maxServerName)
	}
	for _, r := range name {
		if !validNameRune(r) {
			return fmt.Errorf("the name may hold letters, digits, '-' and '_' only (its tools are named mcp__%s__<tool>)", cleanName(name))
		}
	}
	if strings.Contains(name, "__") || strings.HasPrefix(name, "_") || strings.HasSuffix(name, "_") {
		return errors.New("the name may not start or end with '_' or hold \"__\" (it separates the parts of tool names)")
	}
	return nil
}

// resolve expands ${NAME} in each value from metis's environment; a
// variable that is not set is an error naming it ($${ writes a literal
// ${).
func resolve(key string, m map[string]string, getenv Getenv) (map[string]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		r, err := expand(v, getenv)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", key, k, err)
		}
		out[k] = r
	}
	return out, nil
}

func expand(s string, getenv Getenv) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' { // $${ is a literal ${
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", errors.New("an unclosed ${")
		}
		name := s[i+2 : i+j]
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s} does not name an environment variable", name)
		}
		v, ok := getenv(name)
		if !ok {
			return "", fmt.Errorf("it names the environment variable %s, which is not set", name)
		}
		b.WriteString(s[:i] + v)
		s = s[i+j+1:]
	}
}

func validEnvName(n string) bool {
	for i, r := range n {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return n != ""
}

// reservedHeaders are set by the transport; an entry may not set them.
var reservedHeaders = map[string]bool{
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Content-Type": true, "Accept": true,
	"Content-Length": true, "Host": true, "Last-Event-Id": true, "Connection": true, "Transfer-Encoding": true,
}

// check validates a server's transport settings.
func check(c ServerConfig) error {
	switch {
	case c.Command != "" && c.URL != "":
		return errors.New("set command (stdio) or url (streamable HTTP), not both")
	case c.Command == "" && c.URL == "":
		return errors.New("set command (stdio) or url (streamable HTTP)")
	}
	if c.Command != "" {
		if len(c.Headers) > 0 {
			return errors.New("headers are for url servers; a command server takes env")
		}
		if strings.ContainsRune(c.Command, 0) || strings.TrimSpace(c.Command) != c.Command {
			return errors.New("command is not a program name or path")
		}
		if c.Cwd != "" && !filepath.IsAbs(c.Cwd) {
			return fmt.Errorf("cwd %q is not an absolute path", c.Cwd)
		}
		for k, v := range c.Env {
			if !validEnvName(k) {
				return fmt.Errorf("env: %q is not an environment variable name", k)
			}
			if strings.ContainsRune(v, 0) {
				return fmt.Errorf("env: %s holds a NUL byte", k)
			}
		}
		for _, a := range c.Args {
			if strings.ContainsRune(a, 0) {
				return errors.New("args: an argument holds a NUL byte")
			}
		}
		return nil
	}
	if len(c.Env) > 0 || len(c.Args) > 0 || c.Cwd != "" {
		return errors.New("args, env and cwd are for command servers; a url server takes headers")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q is not an http(s) URL", redactURL(c.URL))
	}
	for k, v := range c.Headers {
		if !validHeaderName(k) {
			return fmt.Errorf("headers: %q is not a header name", k)
		}
		if reservedHeaders[http.CanonicalHeaderKey(k)] {
			return fmt.Errorf("headers: %s is set by the transport", http.CanonicalHeaderKey(k))
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("headers: %s holds a line break or NUL byte", k)
		}
	}
	return nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}

// redactURL is a URL as status and errors show it: without user
// information, query or fragment (tokens live there).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "(not a URL)"
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment = nil, "", "", ""
	return u.String()
}

// ErrInvalidServers is wrapped by SessionServers' errors: a session's
// servers that do not validate.
var ErrInvalidServers = errors.New("invalid MCP servers")

// SessionServers checks a session's servers (PUT
// /sessions/{id}/mcp_servers, ACP's mcpServers) and returns them as
// configurations. Their values are literal (never expanded from metis's
// environment); a stdio server's working directory defaults to the
// session's workspace. Names are made valid for tool names
// (SessionServerName) and unique. The first invalid server is an error
// naming it.
func SessionServers(in []protocol.MCPServerConfig, workspace string) ([]ServerConfig, error) {
	if len(in) > protocol.MaxMCPSessionServers {
		return nil, fmt.Errorf("%w: %d servers; a session has at most %d", ErrInvalidServers, len(in), protocol.MaxMCPSessionServers)
	}
	out := make([]ServerConfig, 0, len(in))
	taken := map[string]bool{}
	for i, s := range in {
		name := uniqueName(SessionServerName(s.Name), taken)
		c := ServerConfig{Name: name, Scope: protocol.MCPScopeSession, Command: s.Command, Args: s.Args, Env: nonEmpty(s.Env),
			Cwd: s.Cwd, URL: s.URL, Headers: nonEmpty(s.Headers), StartTimeout: DefaultStartTimeout, CallTimeout: DefaultCallTimeout}
		if c.Command != "" && c.Cwd == "" {
			c.Cwd = workspace
		}
		if err := check(c); err != nil {
			return nil, fmt.Errorf("%w: server %d (%q): %v", ErrInvalidServers, i+1, s.Name, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// SessionServerName makes a name an editor gave a server usable in tool
// names: every character other than a letter, digit or '-' becomes '_',
// runs of '_' become one, leading and trailing '_' go, at most 32 bytes;
// "server" when nothing is left.
func SessionServerName(s string) string {
	c := cleanName(s)
	for strings.Contains(c, "__") {
		c = strings.ReplaceAll(c, "__", "_")
	}
	c = strings.Trim(c, "_")
	if len(c) > maxServerName {
		c = strings.TrimRight(c[:maxServerName], "_")
	}
	if c == "" {
		c = "server"
	}
	return c
}

// uniqueName returns name, or name with the first free suffix -2, -3, …
// when a server of the set has it already.
func uniqueName(name string, taken map[string]bool) string {
	n := name
	for i := 2; taken[n]; i++ {
		suffix := fmt.Sprintf("-%d", i)
		n = name
		if len(n)+len(suffix) > maxServerName {
			n = n[:maxServerName-len(suffix)]
		}
		n += suffix
	}
	taken[n] = true
	return n
}
