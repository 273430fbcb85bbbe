package config

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/metis-agent/metis/internal/tool"
)

var seedConfigs = []string{
	"",
	"tool-env: GOPATH, CARGO_HOME,EDITOR\n",
	"tool_env: OPENAI_API_KEY\n",
	"tool-env: ' ,, A_1 '\n",
	"# nothing\n",
	"null\n",
	"addr: 127.0.0.1:9000\nping-interval: 5s\nping-misses: 2\nclient-queue: 10\nreplay-limit: 3\nretention: 1h\nsnapshot-messages: 0\n" +
		"write-timeout: 1s\nstream-ring: 0\nrouting-poll: 0s\nmodel-idle-timeout: 1m\nmax-output-tokens: 1\nthinking-budget: 0\n" +
		"turn-timeout: 0s\ndefault-model: builtin:demo\ndemo-delay: 0s\nlog-level: debug\n",
	"ping_interval: 1s\nclient_queue: 5\n",
	"socket: off\n",
	"socket: ''\n",
	"socket: run/metis.sock\n",
	"prices:\n  \"anthropic:claude-sonnet-4-6\":\n    input: 3\n    output: 15\n    cache_read: 0.3\n    cache_write: 3.75\n  \"openai:*\": {input: 0.5}\n",
	"prices: {}\n",
	"providers:\n  anthropic: {api_key: k, base_url: \"http://a.local\"}\n  openai: {base_url: \"http://o.local/v1\"}\n",
	"addr: \"\"\n",
	"addr: [1]\n",
	"addr: {a: b}\n",
	"addr: &a x\nlog-level: *a\n",
	"<<: {addr: x}\n",
	"ping-misses: 0\n",
	"ping-misses: 2.5\n",
	"ping-misses: 99999999999999999999\n",
	"retention: -1s\n",
	"retention: 5\n",
	"retention: 9999999999h\n",
	"ping-interval: 1s\nping_interval: 2s\n",
	"ping-misses: 2\nping-misses: 3\n",
	"unknown: 1\n",
	"prices: 3\n",
	"prices:\n  x:y:\n    cache-read: 1\n",
	// Were accepted, and a NaN or infinite price aborted every turn of its
	// model (its cost cannot be written as JSON).
	"prices:\n  x:y: {input: -1}\n",
	"prices:\n  x:y: {output: .inf}\n",
	"prices:\n  x:y: {cache_read: .nan}\n",
	"prices:\n  x:y: null\n",
	"providers: {anthropic: {key: x}}\n",
	"providers: [1]\n",
	"- a\n",
	"ping-misses: [\n",
	"a: b\n---\nc: d\n",
	"!!binary aGk=: 1\n",
	"\xff\xfe",
}

// FuzzLoadFile: loading any config.yaml never panics; a refusal is an
// error naming the file; an accepted file leaves every setting within
// the limits its flag enforces and every price finite and non-negative,
// and the configuration, written back as config.yaml, loads to itself.
func FuzzLoadFile(f *testing.F) {
	for _, s := range seedConfigs {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "config.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c := Defaults()
		if err := c.loadFile(path); err != nil {
			if !strings.HasPrefix(err.Error(), "config "+path+": ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		checkLimits(t, c)

		// Write the result back and load it again.
		out := map[string]any{}
		for _, fl := range fields {
			out[fl.name] = fl.get(&c)
		}
		if c.Prices != nil {
			out["prices"] = c.Prices
		}
		out["providers"] = c.Providers
		b, err := yaml.Marshal(out)
		if err != nil {
			t.Fatalf("marshal %+v: %v", c, err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		again := Defaults()
		if err := again.loadFile(path); err != nil {
			t.Fatalf("written back, the config is refused: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("written back, the config loads differently:\n%+v\n%+v\n%s", c, again, b)
		}
	})
}

// checkLimits checks what the flags enforce.
func checkLimits(t *testing.T, c Config) {
	t.Helper()
	for _, d := range []time.Duration{c.PingInterval, c.Retention, c.TurnTimeout, c.WriteTimeout, c.RoutingPoll, c.ModelIdleTimeout, c.DemoDelay} {
		if d < 0 {
			t.Fatalf("negative duration in %+v", c)
		}
	}
	if c.PingMisses < 1 || c.ClientQueue < 1 || c.ReplayLimit < 1 || c.MaxOutputTokens < 1 ||
		c.SnapshotMessages < 0 || c.StreamRing < 0 || c.ThinkingBudget < 0 {
		t.Fatalf("integer out of range in %+v", c)
	}
	for _, n := range c.ToolEnv {
		if n == "" || tool.IsSecretEnv(n) || strings.ContainsAny(n, "=, ") {
			t.Fatalf("tool-env accepted %q", n)
		}
	}
	for id, p := range c.Prices {
		for _, v := range []float64{p.Input, p.Output, p.CacheRead, p.CacheWrite} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("price of %q is %+v", id, p)
			}
		}
	}
}
