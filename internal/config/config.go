// Package config owns the server's configuration: the defaults, the
// keys of <home>/config.yaml and the flags of `metis serve` (contract
// §1). Flags override the file, which overrides the defaults.
//
// config imports model (for the provider registry: names, settings and
// environment variables), permission (modes and rules), price (for the
// price table type), safefile (to read the file), tool (to refuse
// secrets in tool-env), sandbox (to parse the sandbox's paths) and yaml.
package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/safefile"
	"github.com/metis-agent/metis/internal/sandbox"
	"github.com/metis-agent/metis/internal/tool"
)

// Config is the whole server configuration.
type Config struct {
	Addr             string        // listen address
	Home             string        // state directory
	PingInterval     time.Duration // spec §3.8
	PingMisses       int           // spec §3.8
	ClientQueue      int           // spec §8.1, events
	ClientQueueBytes int           // the same queue's bound in bytes of frames
	ReplayLimit      int           // spec §3.6, events
	Retention        time.Duration // trace store retention
	SnapshotMessages int           // spec §3.4
	TurnTimeout      time.Duration // 0: none
	WriteTimeout     time.Duration // longest a frame write to a client may take
	// OverflowGrace is what a client whose queue overflowed still gets
	// to take the write in progress and the 1008 close frame before the
	// connection is dropped.
	OverflowGrace   time.Duration
	StreamRing      int           // streaming events kept per session for reconnects
	StreamRingBytes int           // bytes kept by every session's ring together (0: no cap)
	DefaultModel    string        // "": builtin:demo unless a provider key (or a local OPENAI_BASE_URL) is set
	DemoDelay       time.Duration // pause between builtin:demo deltas
	LogLevel        string        // debug, info, warn, error

	// ReplayWindowBytes caps the replay windows of every session
	// together: recent catalog events kept in memory so that a
	// reconnect's replay does not read the trace store (0: none).
	ReplayWindowBytes int

	RoutingPoll      time.Duration // how often routing.yaml is checked for changes
	MCPPoll          time.Duration // how often config.yaml's mcp_servers is checked for changes (internal/mcp reads it)
	ModelIdleTimeout time.Duration // a provider stream silent this long fails with class timeout
	MaxOutputTokens  int           // max_tokens of each model call
	ThinkingBudget   int           // extended thinking tokens per call (0: off)
	ToolEnv          []string      // names of variables passed to tool processes besides the allow-list
	// EditTools chooses the edit tools models are offered: auto
	// (apply_patch to OpenAI-family models, edit_file to the others),
	// both, edit_file or apply_patch (tool.EditTools).
	EditTools tool.EditTools
	// WebFetchAllowPrivate lets web_fetch reach loopback, private,
	// link-local and other non-public addresses.
	WebFetchAllowPrivate bool
	// BackgroundCommands bounds the background commands (shell with
	// background: true) one session runs at once; 0 turns them off.
	// BackgroundOutput is each one's output buffer, in bytes.
	BackgroundCommands int
	BackgroundOutput   int

	// The shell sandbox (docs/sandbox.md). On unless SandboxOff.
	SandboxOff      bool     // --sandbox=false: shell commands run unconfined
	SandboxWritable []string // paths commands may write besides the workspace, $TMPDIR and the tool caches
	SandboxHidden   []string // paths commands cannot read besides the metis home and the default credential paths
	SandboxNetwork  bool     // commands may bind and connect TCP sockets

	// Remote access (docs/remote-access.md).
	TokenFile      string        // bearer token file; "": <home>/token, generated when the token is required
	PublicName     string        // names clients use besides the listen address, comma-separated (host, host:port, https://host)
	TLSCert        string        // PEM certificate chain; with TLSKey, serve https
	TLSKey         string        // PEM private key
	ReadTimeout    time.Duration // longest a request body may take to arrive (0: none)
	IdleTimeout    time.Duration // close a keep-alive connection idle this long (0: never)
	MaxConnections int           // connections served at once; more wait to be accepted

	// Socket is the unix socket the server also listens on (the whole
	// API and both streams); "" for none. Defaults has none; Load sets
	// <home>/metis.sock unless the file or --socket says otherwise
	// ("off" or "" turns it off).
	Socket string

	// Cluster mode (docs/scale-out.md): NATS is the URL of a NATS server
	// with JetStream; "" runs single-node. NATSCreds is a NATS
	// credentials file (mode 0600). Node names this node in the cluster
	// ("": the host name).
	NATS      string
	NATSCreds string
	Node      string
	// LeaseTTL is how long a tree's lease lives without renewal (renewed
	// every third of it): a dead node's trees are taken over at most this
	// long after its last renewal. At least 1s.
	LeaseTTL time.Duration
	// NATSReplicas is how many replicas the cluster's stream and its
	// key-value buckets (leases, node directory) keep: 0 picks 3 when
	// the NATS server is part of a cluster and 1 otherwise; 1 to 5.
	NATSReplicas int
	// StreamingTTL is how long the cluster's log keeps a streaming event
	// (a token delta) that a node published: the in-flight ring shared
	// by the nodes. Give every node the same. A whole number of seconds,
	// at least 1s.
	StreamingTTL time.Duration

	Prices    map[string]price.Price // config.yaml only: overrides of the price table
	Providers Providers              // config.yaml `providers`, then the environment

	LongSession  // windows, compaction, caching, the system prompt, budgets (longsession.go)
	Checkpoints  // workspace checkpoints (checkpoints.go)
	Conversation // follow-ups and images (conversation.go)
	// Permissions (docs/permissions.md): the mode of sessions created
	// without one, how long an approval request waits before it is
	// denied, and config.yaml's `permissions:` rules (parsed: a rule
	// that does not parse refuses the start, naming it).
	DefaultMode     permission.Mode
	ApprovalTimeout time.Duration
	Permissions     permission.Rules
	// ShellSandbox is what the policy knows of the sandbox that confines
	// shell commands: not a key or a flag, but the state the server's
	// wiring hands the policy (from the sandbox's probe; test harnesses
	// set it). Unknown, its zero value, is taken as unavailable: shell
	// commands then ask in every mode unless a rule allows them.
	ShellSandbox permission.Sandbox
}

// PermissionsFile is config.yaml's permissions key: rule lists by
// action.
type PermissionsFile struct {
	Allow []string `yaml:"allow"`
	Ask   []string `yaml:"ask"`
	Deny  []string `yaml:"deny"`
}

// Provider is one provider's endpoint and key.
type Provider = model.ProviderSettings

// Providers holds the settings of the model providers by name, from
// config.yaml's providers.<name>, each overridden by its provider's
// environment variables ($ANTHROPIC_API_KEY, $OPENAI_BASE_URL, ...: the
// registry of internal/model names them). A name no registered provider
// has is refused. nil when nothing is set.
type Providers = map[string]Provider

// Defaults returns the configuration before the file and flags apply.
func Defaults() Config {
	c := Config{
		Addr:              "127.0.0.1:8421",
		Home:              defaultHome(),
		PingInterval:      30 * time.Second,
		PingMisses:        3,
		ClientQueue:       1000,
		ClientQueueBytes:  8 << 20,
		ReplayLimit:       10000,
		Retention:         168 * time.Hour,
		SnapshotMessages:  50,
		WriteTimeout:      10 * time.Second,
		OverflowGrace:     300 * time.Millisecond,
		ModelIdleTimeout:  90 * time.Second,
		RoutingPoll:       time.Second,
		MCPPoll:           time.Second,
		MaxOutputTokens:   8192,
		StreamRing:        4096,
		StreamRingBytes:   64 << 20,
		DemoDelay:         20 * time.Millisecond,
		LogLevel:          "info",
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxConnections:    1024,
		LeaseTTL:          10 * time.Second,
		StreamingTTL:      15 * time.Minute,
		EditTools:         tool.EditToolsAuto,
		LongSession:       defaultLongSession(),
		Checkpoints:       defaultCheckpoints(),
		Conversation:      defaultConversation(),
		DefaultMode:       permission.ModeDefault,
		ApprovalTimeout:   5 * time.Minute,
		ReplayWindowBytes: 32 << 20,
	}
	c.BackgroundCommands, c.BackgroundOutput = tool.DefaultBackgroundCommands, tool.DefaultBackgroundOutput
	return c
}

func defaultHome() string {
	if h := os.Getenv("METIS_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".metis")
	}
	return ".metis"
}

// field binds one setting to its flag and config.yaml key.
type field struct {
	name  string // flag name; the yaml key is the same, '-' or '_'
	usage string
	get   func(*Config) string
	set   func(*Config, string) error
}

func durField(name, usage string, p func(*Config) *time.Duration) field {
	return field{name, usage,
		func(c *Config) string { return p(c).String() },
		func(c *Config, s string) error {
			d, err := time.ParseDuration(s)
			if err != nil {
				return err
			}
			if d < 0 {
				return errors.New("must not be negative")
			}
			*p(c) = d
			return nil
		}}
}

func intField(name, usage string, min int, p func(*Config) *int) field {
	return field{name, usage,
		func(c *Config) string { return strconv.Itoa(*p(c)) },
		func(c *Config, s string) error {
			n, err := strconv.Atoi(s)
			if err != nil {
				return err
			}
			if n < min {
				return fmt.Errorf("must be at least %d", min)
			}
			*p(c) = n
			return nil
		}}
}

func boolField(name, usage string, p func(*Config) *bool) field {
	return field{name, usage,
		func(c *Config) string { return strconv.FormatBool(*p(c)) },
		func(c *Config, s string) error {
			b, err := parseBool(s)
			if err != nil {
				return err
			}
			*p(c) = b
			return nil
		}}
}

// parseBool accepts true/false, on/off, yes/no and 1/0.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "on", "yes", "1":
		return true, nil
	case "false", "off", "no", "0":
		return false, nil
	}
	return false, fmt.Errorf("%q: want true or false", s)
}

func pathsField(name, usage string, p func(*Config) *[]string) field {
	return field{name, usage,
		func(c *Config) string { return strings.Join(*p(c), ",") },
		func(c *Config, s string) error {
			paths, err := sandbox.ParsePaths(s)
			if err != nil {
				return err
			}
			*p(c) = paths
			return nil
		}}
}

func strField(name, usage string, p func(*Config) *string) field {
	return field{name, usage,
		func(c *Config) string { return *p(c) },
		func(c *Config, s string) error { *p(c) = s; return nil }}
}

var fields = []field{
	strField("nats", "URL of a NATS server with JetStream: run as a node of a metis cluster sharing its log (default: single-node)", func(c *Config) *string { return &c.NATS }),
	strField("nats-creds", "NATS credentials file (mode 0600) for --nats", func(c *Config) *string { return &c.NATSCreds }),
	strField("node", "this node's name in the cluster, unique among its nodes (default the host name)", func(c *Config) *string { return &c.Node }),
	durField("streaming-ttl", "cluster mode: how long the log keeps a streaming event (a token delta) for replays from any node; give every node the same (whole seconds, at least 1s)", func(c *Config) *time.Duration { return &c.StreamingTTL }),
	intField("nats-replicas", "cluster mode: replicas of the log's stream and buckets, 1 to 5 (0: 3 when the NATS server is part of a cluster, else 1)", 0, func(c *Config) *int { return &c.NATSReplicas }),
	durField("lease-ttl", "cluster mode: how long a tree's lease lives without renewal (renewed every third of it); a dead node's trees move to another node within it (at least 1s)", func(c *Config) *time.Duration { return &c.LeaseTTL }),
	strField("addr", "listen address", func(c *Config) *string { return &c.Addr }),
	durField("ping-interval", "idle time before the server pings a client", func(c *Config) *time.Duration { return &c.PingInterval }),
	intField("ping-misses", "unanswered pings before a client is dropped", 1, func(c *Config) *int { return &c.PingMisses }),
	intField("client-queue", "events queued per client before it is dropped as too slow", 1, func(c *Config) *int { return &c.ClientQueue }),
	intField("client-queue-bytes", "bytes of frames queued per client before it is dropped as too slow (a single larger frame is still sent)", 1, func(c *Config) *int { return &c.ClientQueueBytes }),
	intField("replay-limit", "most events replayed to a reconnecting client", 1, func(c *Config) *int { return &c.ReplayLimit }),
	durField("retention", "how long the trace store keeps events", func(c *Config) *time.Duration { return &c.Retention }),
	intField("snapshot-messages", "messages in a snapshot", 0, func(c *Config) *int { return &c.SnapshotMessages }),
	durField("overflow-grace", "how long a client found too slow still gets to take its close frame before it is dropped", func(c *Config) *time.Duration { return &c.OverflowGrace }),
	durField("write-timeout", "close a client whose frame write takes longer than this", func(c *Config) *time.Duration { return &c.WriteTimeout }),
	intField("stream-ring", "streaming events kept per session so a reconnecting client gets its deltas back", 0, func(c *Config) *int { return &c.StreamRing }),
	intField("stream-ring-bytes", "bytes the streaming rings of all sessions may hold together; over it, idle sessions' oldest events go first (0: no cap)", 0, func(c *Config) *int { return &c.StreamRingBytes }),
	intField("replay-window-bytes", "bytes of recent catalog events kept in memory, per session up to --replay-limit events, so that reconnects replay without reading the trace store; over it, the least recently used sessions' go first (0: none)", 0, func(c *Config) *int { return &c.ReplayWindowBytes }),
	durField("routing-poll", "how often <home>/routing.yaml is checked for changes", func(c *Config) *time.Duration { return &c.RoutingPoll }),
	durField("mcp-poll", "how often <home>/config.yaml's mcp_servers is checked for changes (0: never reloaded)", func(c *Config) *time.Duration { return &c.MCPPoll }),
	durField("model-idle-timeout", "fail a model call whose stream sends nothing for this long", func(c *Config) *time.Duration { return &c.ModelIdleTimeout }),
	intField("max-output-tokens", "max_tokens of each model call", 1, func(c *Config) *int { return &c.MaxOutputTokens }),
	intField("thinking-budget", "extended thinking tokens per model call where the model supports it (0: off)", 0, func(c *Config) *int { return &c.ThinkingBudget }),
	{"tool-env", "comma-separated names of environment variables passed to tool processes besides the allow-list (never credentials)",
		func(c *Config) string { return strings.Join(c.ToolEnv, ",") },
		func(c *Config, s string) error {
			names, err := parseToolEnv(s)
			if err != nil {
				return err
			}
			c.ToolEnv = names
			return nil
		}},
	{"sandbox", "confine shell commands (Landlock): they write only in the workspace, their $TMPDIR and the tool caches, cannot read the metis home or credential files, and have no TCP; false runs them with the server's rights (docs/sandbox.md)",
		func(c *Config) string { return strconv.FormatBool(!c.SandboxOff) },
		func(c *Config, s string) error {
			on, err := parseBool(s)
			c.SandboxOff = !on
			return err
		}},
	pathsField("sandbox-writable", "comma-separated paths (absolute or ~/...) shell commands may also write in the sandbox", func(c *Config) *[]string { return &c.SandboxWritable }),
	pathsField("sandbox-hidden", "comma-separated paths (absolute or ~/...) shell commands cannot read in the sandbox, besides the metis home and ~/.ssh, ~/.aws and the other credential paths", func(c *Config) *[]string { return &c.SandboxHidden }),
	boolField("sandbox-network", "let shell commands in the sandbox bind and connect TCP sockets", func(c *Config) *bool { return &c.SandboxNetwork }),
	{"edit-tools", "edit tools offered to models: auto (apply_patch to OpenAI-family models, edit_file to the others), both, edit_file or apply_patch",
		func(c *Config) string { return string(c.EditTools) },
		func(c *Config, s string) error {
			e, err := tool.ParseEditTools(s)
			if err != nil {
				return err
			}
			c.EditTools = e
			return nil
		}},
	intField("background-commands", "background commands (shell with background: true) one session may run at once; 0 turns them off", 0, func(c *Config) *int { return &c.BackgroundCommands }),
	intField("background-output", "bytes of output kept per background command between two reads of it (the oldest are dropped)", 4096, func(c *Config) *int { return &c.BackgroundOutput }),
	boolField("web-fetch-allow-private", "let web_fetch reach loopback, private, link-local and other non-public addresses (this machine, the LAN, cloud metadata services)", func(c *Config) *bool { return &c.WebFetchAllowPrivate }),
	durField("turn-timeout", "cancel turns running longer than this (0: never)", func(c *Config) *time.Duration { return &c.TurnTimeout }),
	{"default-mode", "permission mode of sessions created without one: default (reads run; edits, commands, fetches and external tools ask), accept_edits, plan or auto",
		func(c *Config) string { return string(c.DefaultMode) },
		func(c *Config, s string) error {
			m, err := permission.ParseMode(s)
			if err != nil {
				return err
			}
			c.DefaultMode = m
			return nil
		}},
	{"approval-timeout", "deny a tool call's approval request nobody answered within this (at least 1s)",
		func(c *Config) string { return c.ApprovalTimeout.String() },
		func(c *Config, s string) error {
			d, err := time.ParseDuration(s)
			if err != nil {
				return err
			}
			if d < time.Second {
				return errors.New("must be at least 1s")
			}
			c.ApprovalTimeout = d
			return nil
		}},
	strField("default-model", "model of sessions created without one (default builtin:demo, a provider whose key is set, or the first model OPENAI_BASE_URL lists)", func(c *Config) *string { return &c.DefaultModel }),
	durField("demo-delay", "pause between builtin:demo deltas", func(c *Config) *time.Duration { return &c.DemoDelay }),
	strField("log-level", "debug, info, warn or error", func(c *Config) *string { return &c.LogLevel }),
	strField("token-file", "bearer token file (mode 0600); giving one requires the token even on loopback (default <home>/token, generated when --addr is not loopback)", func(c *Config) *string { return &c.TokenFile }),
	strField("public-name", "names clients reach the server by besides --addr, comma-separated: host, host:port or https://host behind a TLS proxy; requires the token", func(c *Config) *string { return &c.PublicName }),
	strField("tls-cert", "PEM certificate file: serve https (needs --tls-key)", func(c *Config) *string { return &c.TLSCert }),
	strField("tls-key", "PEM private key file of --tls-cert", func(c *Config) *string { return &c.TLSKey }),
	durField("read-timeout", "longest a request body may take to arrive (0: none)", func(c *Config) *time.Duration { return &c.ReadTimeout }),
	durField("idle-timeout", "close a keep-alive connection idle this long (0: never)", func(c *Config) *time.Duration { return &c.IdleTimeout }),
	intField("max-connections", "connections served at once; more wait until one closes", 1, func(c *Config) *int { return &c.MaxConnections }),
	{"socket", "unix socket the server also listens on, mode 0600; \"off\" or \"\" for none (default <home>/" + SocketName + ")",
		func(c *Config) string { return c.Socket },
		func(c *Config, s string) error {
			p, err := socketPath(s)
			if err != nil {
				return err
			}
			c.Socket = p
			return nil
		}},
}

// structured are the config.yaml keys whose value is a mapping, not a
// flag's single value, by name, each with its decoder.
var structured = map[string]func(c *Config, node *yaml.Node) error{}

// SocketName is the file name of the server's unix socket in its home.
const SocketName = "metis.sock"

// socketPath parses the socket setting: "off" or "" is none, anything
// else a path, made absolute (a relative one is taken from the working
// directory).
func socketPath(s string) (string, error) {
	if s == "" || s == "off" {
		return "", nil
	}
	if strings.ContainsRune(s, 0) {
		return "", errors.New("a path cannot hold a NUL byte")
	}
	p, err := filepath.Abs(s)
	if err != nil {
		return "", err
	}
	return p, nil
}

// Load parses `metis serve` arguments, reads <home>/config.yaml (home
// from --home, else $METIS_HOME, else ~/.metis) and returns the merged
// configuration. A missing file is fine; an unreadable or invalid one is
// an error naming the key.
func Load(args []string) (Config, error) {
	cfg := Defaults()
	fs := flag.NewFlagSet("metis serve", flag.ContinueOnError)
	home := fs.String("home", cfg.Home, "state directory (default $METIS_HOME, else ~/.metis)")
	set := map[string]string{}
	fs.SetOutput(io.Discard) // errors are returned, not printed with the whole usage
	for _, f := range fields {
		usage := f.usage
		if d := f.get(&cfg); d != "" {
			usage += " (default " + d + ")"
		}
		fs.Func(f.name, usage, func(s string) error {
			set[f.name] = s
			return f.set(&Config{}, s) // validate now; applied after the file
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fmt.Fprintln(os.Stderr, "usage: metis serve [flags]; every flag is also a key of <home>/config.yaml")
			fs.PrintDefaults()
		}
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg.Home = *home
	sock, err := socketPath(filepath.Join(cfg.Home, SocketName))
	if err != nil {
		return Config{}, fmt.Errorf("--home: %w", err)
	}
	cfg.Socket = sock
	if err := cfg.loadFile(filepath.Join(cfg.Home, "config.yaml")); err != nil {
		return Config{}, err
	}
	cfg.Providers = providersFromEnv(cfg.Providers, os.Getenv)
	for _, f := range fields {
		if v, ok := set[f.name]; ok {
			if err := f.set(&cfg, v); err != nil {
				return Config{}, fmt.Errorf("--%s: %w", f.name, err)
			}
		}
	}
	return cfg, nil
}

// parseToolEnv parses the tool-env setting: variable names separated by
// commas. A name that is not a valid variable name, or that looks like a
// secret (tool.IsSecretEnv), is an error: such a variable would never be
// passed, and saying so beats dropping it silently.
func parseToolEnv(s string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !validEnvName(n) {
			return nil, fmt.Errorf("%q is not an environment variable name", n)
		}
		if tool.IsSecretEnv(n) {
			return nil, fmt.Errorf("%s looks like a credential or a metis setting; tools never get those", n)
		}
		names = append(names, n)
	}
	return names, nil
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

// MaxFileBytes is the size limit of config.yaml.
const MaxFileBytes = safefile.DefaultLimit

func (c *Config) loadFile(path string) error {
	// Only a regular file, at most 1 MiB, opened without blocking: a FIFO
	// or a device (or a symlink to one) would hang the start, a huge file
	// exhaust memory.
	b, err := safefile.ReadRegular(path, MaxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var raw map[string]yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s: more than one YAML document (a stray \"---\"?); keep one", path)
	}
	byName := map[string]field{}
	for _, f := range fields {
		byName[f.name] = f
	}
	seen := map[string]string{} // name -> the key that set it
	for key, node := range raw {
		name := strings.ReplaceAll(key, "_", "-")
		if other, dup := seen[name]; dup {
			a, b := min(key, other), max(key, other)
			return fmt.Errorf("config %s: %q and %q are the same key; set it once", path, a, b)
		}
		seen[name] = key
		if name == "prices" {
			if err := decodeStrict(&node, &c.Prices); err != nil {
				return fmt.Errorf("config %s: prices: %w", path, err)
			}
			if err := checkPrices(c.Prices); err != nil {
				return fmt.Errorf("config %s: prices: %w", path, err)
			}
			continue
		}
		if name == "mcp-servers" {
			// MCP servers (docs/mcp.md) are read, checked and reloaded by
			// internal/mcp, which reports a bad entry by name without
			// refusing the start.
			continue
		}
		if name == "permissions" {
			var pf PermissionsFile
			if err := decodeStrict(&node, &pf); err != nil {
				return fmt.Errorf("config %s: permissions: %w", path, err)
			}
			rules, err := permission.ParseRules(pf.Allow, pf.Ask, pf.Deny)
			if err != nil {
				return fmt.Errorf("config %s: permissions: %w", path, err)
			}
			c.Permissions = rules
			continue
		}
		if name == "providers" {
			if err := decodeStrict(&node, &c.Providers); err != nil {
				return fmt.Errorf("config %s: providers: %w", path, err)
			}
			if len(c.Providers) == 0 {
				c.Providers = nil
			}
			for name := range c.Providers {
				if _, ok := model.LookupProvider(name); !ok {
					return fmt.Errorf("config %s: providers: unknown provider %q (known: %s)", path, name, providerNames())
				}
			}
			continue
		}
		if decode, ok := structured[name]; ok {
			if err := decode(c, &node); err != nil {
				return fmt.Errorf("config %s: %s: %w", path, key, err)
			}
			continue
		}
		f, ok := byName[name]
		if !ok {
			return fmt.Errorf("config %s: unknown key %q", path, key)
		}
		if node.Kind != yaml.ScalarNode {
			return fmt.Errorf("config %s: %s: want a single value", path, key)
		}
		if node.Tag == "!!null" { // "key:", "key: null", "key: ~"
			return fmt.Errorf("config %s: %s has no value; remove the key to keep the default", path, key)
		}
		if err := f.set(c, node.Value); err != nil {
			return fmt.Errorf("config %s: %s: %w", path, key, err)
		}
	}
	return nil
}

// checkPrices refuses a price that is negative or not a finite number
// (YAML's .nan and .inf): a NaN or infinite cost cannot be written as
// JSON, so every event carrying it, and the turn, would fail.
func checkPrices(prices map[string]price.Price) error {
	for id, p := range prices {
		for _, v := range []struct {
			key string
			val float64
		}{{"input", p.Input}, {"output", p.Output}, {"cache_read", p.CacheRead}, {"cache_write", p.CacheWrite}} {
			if math.IsNaN(v.val) || math.IsInf(v.val, 0) || v.val < 0 {
				return fmt.Errorf("%q: %s is %v; want a non-negative number", id, v.key, v.val)
			}
		}
	}
	return nil
}

// decodeStrict decodes node into v, refusing fields v does not have (a
// misspelled price field such as cache-read would otherwise be 0).
func decodeStrict(node *yaml.Node, v any) error {
	b, err := yaml.Marshal(node)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// providersFromEnv overlays each registered provider's environment
// variables on its settings.
func providersFromEnv(ps Providers, getenv func(string) string) Providers {
	for _, p := range model.Providers() {
		s := p.FromEnv(ps[p.Name], getenv)
		if s == (Provider{}) {
			continue
		}
		if ps == nil {
			ps = Providers{}
		}
		ps[p.Name] = s
	}
	if len(ps) == 0 {
		return nil
	}
	return ps
}

func providerNames() string {
	var names []string
	for _, p := range model.Providers() {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}
