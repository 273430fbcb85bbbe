package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/tool"
)

// contractDefaults are the defaults of contract §1.
func checkContractDefaults(t *testing.T, c Config) {
	t.Helper()
	for _, x := range []struct {
		name      string
		got, want any
	}{
		{"addr", c.Addr, "127.0.0.1:8421"},
		{"ping-interval", c.PingInterval, 30 * time.Second},
		{"ping-misses", c.PingMisses, 3},
		{"client-queue", c.ClientQueue, 1000},
		{"replay-limit", c.ReplayLimit, 10000},
		{"retention", c.Retention, 168 * time.Hour},
		{"snapshot-messages", c.SnapshotMessages, 50},
		{"turn-timeout", c.TurnTimeout, time.Duration(0)},
		{"default-model", c.DefaultModel, ""},
	} {
		if x.got != x.want {
			t.Errorf("%s = %v, want %v", x.name, x.got, x.want)
		}
	}
}

func writeConfig(t *testing.T, dir, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDefaults(t *testing.T) {
	t.Setenv("METIS_HOME", "")
	d := Defaults()
	checkContractDefaults(t, d)
	if d.Prices != nil {
		t.Errorf("default prices %v", d.Prices)
	}
	if home, err := os.UserHomeDir(); err == nil && d.Home != filepath.Join(home, ".metis") {
		t.Errorf("home %q, want ~/.metis", d.Home)
	}

	// Load with no file and no flags gives the same.
	dir := t.TempDir()
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	checkContractDefaults(t, c)
	if c.Home != dir {
		t.Errorf("home %q, want %q", c.Home, dir)
	}
	want := d
	want.Home = dir
	want.Socket = filepath.Join(dir, SocketName) // Load's default; Defaults has none
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load without file or flags\n got %+v\nwant %+v", c, want)
	}
}

func TestFileOverridesDefaults(t *testing.T) {
	for _, sep := range []string{"-", "_"} {
		t.Run("separator "+sep, func(t *testing.T) {
			dir := t.TempDir()
			k := func(s string) string { return strings.ReplaceAll(s, "-", sep) }
			writeConfig(t, dir, strings.Join([]string{
				"# a comment",
				"addr: 127.0.0.1:9000",
				k("ping-interval") + ": 250ms",
				k("ping-misses") + ": 5",
				k("client-queue") + ": 10",
				k("replay-limit") + ": 20",
				"retention: 2h30m",
				k("snapshot-messages") + ": 0",
				k("turn-timeout") + ": 90s",
				k("default-model") + ": openai:gpt-4.1",
				k("demo-delay") + ": 0s",
				k("log-level") + ": debug",
				"",
			}, "\n"))
			c, err := Load([]string{"--home", dir})
			if err != nil {
				t.Fatal(err)
			}
			want := Defaults()
			want.Home = dir
			want.Socket = filepath.Join(dir, SocketName)
			want.Addr = "127.0.0.1:9000"
			want.PingInterval = 250 * time.Millisecond
			want.PingMisses = 5
			want.ClientQueue = 10
			want.ReplayLimit = 20
			want.Retention = 150 * time.Minute
			want.SnapshotMessages = 0
			want.TurnTimeout = 90 * time.Second
			want.DefaultModel = "openai:gpt-4.1"
			want.DemoDelay = 0
			want.LogLevel = "debug"
			if !reflect.DeepEqual(c, want) {
				t.Errorf("\n got %+v\nwant %+v", c, want)
			}
		})
	}
}

func TestPartialFileKeepsOtherDefaults(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "ping_interval: 1s\n")
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.PingInterval != time.Second {
		t.Errorf("ping-interval %v", c.PingInterval)
	}
	c.PingInterval = 30 * time.Second
	checkContractDefaults(t, c)
}

func TestEmptyFiles(t *testing.T) {
	for name, text := range map[string]string{"empty": "", "comments": "# nothing\n# here\n", "blank": "\n\n  \n", "document marker": "---\n"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeConfig(t, dir, text)
			c, err := Load([]string{"--home", dir})
			if err != nil {
				t.Fatal(err)
			}
			checkContractDefaults(t, c)
		})
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "ping-interval: 5s\nping-misses: 7\nretention: 1h\naddr: 127.0.0.1:9000\n")
	c, err := Load([]string{"--home", dir, "--ping-interval", "7s", "--ping-misses=2", "--turn-timeout", "1m", "--addr", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if c.PingInterval != 7*time.Second || c.PingMisses != 2 || c.TurnTimeout != time.Minute || c.Addr != "127.0.0.1:0" {
		t.Errorf("flags did not win: %+v", c)
	}
	if c.Retention != time.Hour {
		t.Errorf("file value lost: retention %v", c.Retention)
	}
	if c.ClientQueue != 1000 {
		t.Errorf("default lost: client-queue %d", c.ClientQueue)
	}

	// Every flag is accepted and applied.
	c, err = Load([]string{"--home", dir, "--ping-interval=1s", "--ping-misses=4", "--client-queue=5", "--replay-limit=6",
		"--retention=3h", "--snapshot-messages=8", "--turn-timeout=9s", "--default-model=builtin:demo",
		"--demo-delay=1ms", "--log-level=warn", "--addr=localhost:1", "--write-timeout=11s", "--stream-ring=12",
		"--model-idle-timeout=13s", "--max-output-tokens=14", "--routing-poll=15s", "--thinking-budget=2048", "--stream-ring-bytes=16",
		"--token-file=/t", "--public-name=m.example", "--tls-cert=/c", "--tls-key=/k", "--read-timeout=16s", "--idle-timeout=17s", "--max-connections=18",
		"--client-queue-bytes=19", "--socket=/s", "--overflow-grace=20ms", "--lease-ttl=21s", "--streaming-ttl=22s", "--nats-replicas=3",
		"--edit-tools=both", "--web-fetch-allow-private=true", "--replay-window-bytes=25", "--background-commands=2", "--background-output=8192",
		"--max-calls=23", "--max-turn-cost=2.5", "--max-session-cost=0", "--auto-compact=false", "--compaction-model=builtin:demo",
		"--prompt-cache=false", "--system-prompt=be brief", "--system-prompt-file=/p", "--max-instruction-bytes=24",
		"--default-mode=plan", "--approval-timeout=23s", "--mcp-poll=23s",
		"--checkpoints=false", "--checkpoint-git=/g", "--checkpoint-max-file-bytes=25", "--checkpoint-max-new-files=26",
		"--max-queued-turns=25", "--max-images=26", "--max-image-bytes=27"})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Addr: "localhost:1", Home: dir, PingInterval: time.Second, PingMisses: 4, ClientQueue: 5, ReplayLimit: 6,
		Retention: 3 * time.Hour, SnapshotMessages: 8, TurnTimeout: 9 * time.Second, DefaultModel: "builtin:demo",
		DemoDelay: time.Millisecond, LogLevel: "warn", WriteTimeout: 11 * time.Second, StreamRing: 12,
		ModelIdleTimeout: 13 * time.Second, MaxOutputTokens: 14, RoutingPoll: 15 * time.Second, ThinkingBudget: 2048, StreamRingBytes: 16,
		TokenFile: "/t", PublicName: "m.example", TLSCert: "/c", TLSKey: "/k", ReadTimeout: 16 * time.Second, IdleTimeout: 17 * time.Second, MaxConnections: 18,
		ClientQueueBytes: 19, Socket: "/s", OverflowGrace: 20 * time.Millisecond, LeaseTTL: 21 * time.Second,
		StreamingTTL: 22 * time.Second, NATSReplicas: 3, EditTools: tool.EditToolsBoth, WebFetchAllowPrivate: true, ReplayWindowBytes: 25,
		BackgroundCommands: 2, BackgroundOutput: 8192, DefaultMode: "plan", ApprovalTimeout: 23 * time.Second,
		LongSession: LongSession{MaxCalls: 23, MaxTurnCost: 2.5, CompactionModel: "builtin:demo", SystemPrompt: "be brief",
			SystemPromptFile: "/p", MaxInstructionBytes: 24}, MCPPoll: 23 * time.Second,
		Checkpoints:  Checkpoints{CheckpointGit: "/g", CheckpointMaxFileBytes: 25, CheckpointMaxNewFiles: 26},
		Conversation: Conversation{MaxQueuedTurns: 25, MaxImages: 26, MaxImageBytes: 27}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("\n got %+v\nwant %+v", c, want)
	}
	// The last of a repeated flag wins.
	c, err = Load([]string{"--home", dir, "--ping-misses=2", "--ping-misses=3"})
	if err != nil || c.PingMisses != 3 {
		t.Errorf("repeated flag: %d, %v", c.PingMisses, err)
	}
}

func TestMetisHome(t *testing.T) {
	env := t.TempDir()
	writeConfig(t, env, "ping-misses: 9\n")
	t.Setenv("METIS_HOME", env)
	c, err := Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Home != env || c.PingMisses != 9 {
		t.Errorf("METIS_HOME not used: home %q, ping-misses %d", c.Home, c.PingMisses)
	}
	if d := Defaults(); d.Home != env {
		t.Errorf("Defaults().Home %q, want %q", d.Home, env)
	}

	// --home wins over METIS_HOME, and its file is the one read.
	flag := t.TempDir()
	writeConfig(t, flag, "ping-misses: 4\n")
	c, err = Load([]string{"--home", flag})
	if err != nil {
		t.Fatal(err)
	}
	if c.Home != flag || c.PingMisses != 4 {
		t.Errorf("--home: home %q, ping-misses %d", c.Home, c.PingMisses)
	}

	// A home without a config.yaml is fine.
	empty := t.TempDir()
	t.Setenv("METIS_HOME", empty)
	c, err = Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Home != empty {
		t.Errorf("home %q", c.Home)
	}
	checkContractDefaults(t, c)
}

func TestFileErrors(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string // substrings of the error
	}{
		{"unknown key", "ping-intervall: 1s\n", []string{"ping-intervall", "unknown"}},
		{"unknown key underscore", "client_queue_size: 3\n", []string{"client_queue_size"}},
		{"bad duration", "ping-interval: soon\n", []string{"ping-interval"}},
		{"duration without unit", "retention: 5\n", []string{"retention"}},
		{"negative duration", "turn-timeout: -1s\n", []string{"turn-timeout", "negative"}},
		{"negative duration underscore", "ping_interval: -5ms\n", []string{"ping_interval", "negative"}},
		{"empty duration", "retention:\n", []string{"retention"}},
		{"null string", "default-model: null\n", []string{"default-model", "no value"}},
		{"tilde string", "addr: ~\n", []string{"addr", "no value"}},
		{"second document", "ping-misses: 2\n---\nwhatever: [\n", []string{"more than one YAML document"}},
		{"second document valid", "ping-misses: 2\n---\nping-misses: 5\n", []string{"more than one YAML document"}},
		{"ping-misses 0", "ping-misses: 0\n", []string{"ping-misses"}},
		{"ping_misses 0", "ping_misses: 0\n", []string{"ping_misses"}},
		{"negative ping-misses", "ping-misses: -2\n", []string{"ping-misses"}},
		{"client-queue 0", "client-queue: 0\n", []string{"client-queue"}},
		{"replay-limit 0", "replay-limit: 0\n", []string{"replay-limit"}},
		{"negative snapshot-messages", "snapshot-messages: -1\n", []string{"snapshot-messages"}},
		{"not an int", "client-queue: many\n", []string{"client-queue"}},
		{"float int", "ping-misses: 2.5\n", []string{"ping-misses"}},
		{"list value", "ping-misses: [1, 2]\n", []string{"ping-misses"}},
		{"map value", "addr: {host: x}\n", []string{"addr"}},
		{"not yaml", "ping-misses: [\n", []string{"config"}},
		{"top-level list", "- ping-misses\n", []string{"config"}},
		{"duplicate key", "ping-misses: 2\nping-misses: 3\n", []string{"ping-misses"}},
		{"both spellings", "ping-interval: 1s\nping_interval: 2s\n", []string{"ping"}},
		{"bad prices", "prices: 3\n", []string{"prices"}},
		{"misspelled price field", "prices:\n  x:y:\n    cache-read: 1\n", []string{"prices", "cache-read"}},
		{"bad price value", "prices:\n  x:y:\n    input: cheap\n", []string{"prices"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeConfig(t, dir, c.text)
			_, err := Load([]string{"--home", dir})
			if err == nil {
				t.Fatalf("no error for %q", c.text)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestBothSpellingsRefused: the two spellings of one key in one file are
// refused rather than resolved in map order (which would make the result
// vary from run to run).
func TestBothSpellingsRefused(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "ping-interval: 1s\nping_interval: 2s\n")
	for range 20 {
		if _, err := Load([]string{"--home", dir}); err == nil || !strings.Contains(err.Error(), "ping-interval") || !strings.Contains(err.Error(), "ping_interval") {
			t.Fatalf("error %v, want one naming both spellings", err)
		}
	}
}

func TestUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	// A directory where the file should be cannot be read.
	if err := os.Mkdir(filepath.Join(dir, "config.yaml"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Load([]string{"--home", dir}); err == nil || !strings.Contains(err.Error(), "config") {
		t.Fatalf("error %v", err)
	}
}

func TestFlagErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--ping-interval", "soon"}, "ping-interval"},
		{[]string{"--ping-interval=-1s"}, "ping-interval"},
		{[]string{"--retention=-1h"}, "retention"},
		{[]string{"--turn-timeout", "-5s"}, "turn-timeout"},
		{[]string{"--ping-misses", "0"}, "ping-misses"},
		{[]string{"--ping-misses=x"}, "ping-misses"},
		{[]string{"--client-queue=0"}, "client-queue"},
		{[]string{"--replay-limit=-1"}, "replay-limit"},
		{[]string{"--snapshot-messages=-1"}, "snapshot-messages"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"extra"}, "extra"},
		{[]string{"--ping-misses"}, "ping-misses"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := append([]string{"--home", dir}, c.args...)
			_, err := Load(args)
			if err == nil {
				t.Fatalf("no error for %v", c.args)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
	// A bad flag is an error even when the file sets the key correctly,
	// and a bad file is an error even when a flag would override it.
	writeConfig(t, dir, "ping-misses: 4\n")
	if _, err := Load([]string{"--home", dir, "--ping-misses=0"}); err == nil {
		t.Error("bad flag over a good file accepted")
	}
	writeConfig(t, dir, "ping-misses: 0\n")
	if _, err := Load([]string{"--home", dir, "--ping-misses=4"}); err == nil {
		t.Error("bad file under a good flag accepted")
	}
}

func TestPrices(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, `
ping-misses: 2
prices:
  "anthropic:claude-sonnet-4-6":
    input: 3
    output: 15
    cache_read: 0.3
    cache_write: 3.75
  openai:gpt-4.1:
    input: 2
    output: 8
  "openai:":
    input: 0.5
`)
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]price.Price{
		"anthropic:claude-sonnet-4-6": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
		"openai:gpt-4.1":              {Input: 2, Output: 8},
		"openai:":                     {Input: 0.5},
	}
	if !reflect.DeepEqual(c.Prices, want) {
		t.Errorf("prices\n got %+v\nwant %+v", c.Prices, want)
	}
	if c.PingMisses != 2 {
		t.Errorf("ping-misses %d", c.PingMisses)
	}
	// Without prices the table is nil (the built-in one applies).
	dir2 := t.TempDir()
	writeConfig(t, dir2, "ping-misses: 2\n")
	c, err = Load([]string{"--home", dir2})
	if err != nil || c.Prices != nil {
		t.Errorf("prices %v, %v", c.Prices, err)
	}
}

func TestProvidersFromFileAndEnv(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"} {
		t.Setenv(k, "")
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(
		"providers:\n  anthropic:\n    api_key: file-key\n    base_url: http://a.local\n  openai:\n    base_url: http://o.local/v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "env-key")
	t.Setenv("ANTHROPIC_BASE_URL", "http://env.local")
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	want := Providers{"anthropic": {APIKey: "file-key", BaseURL: "http://env.local"}, "openai": {APIKey: "env-key", BaseURL: "http://o.local/v1"}}
	if !reflect.DeepEqual(c.Providers, want) {
		t.Fatalf("providers %+v, want %+v", c.Providers, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("providers:\n  anthropic:\n    key: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load([]string{"--home", dir}); err == nil || !strings.Contains(err.Error(), "providers") {
		t.Fatalf("misspelled provider field: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("providers:\n  antropic:\n    api_key: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load([]string{"--home", dir}); err == nil || !strings.Contains(err.Error(), `unknown provider "antropic"`) {
		t.Fatalf("misspelled provider name: %v", err)
	}
}
