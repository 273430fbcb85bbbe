package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

func routeOf(t *testing.T, evs []*protocol.EventEnvelope) map[string]any {
	for _, e := range evs {
		if e.Type == string(event.RouteDecided) {
			return payloadOf(t, e)
		}
	}
	t.Fatal("no route.decided")
	return nil
}

// TestRoutingPolicyHotReload: a rule fires and is named in route.decided;
// editing routing.yaml yields routing.policy_reloaded on attached streams
// and a new policy_version; a broken file keeps the policy and yields a
// warning; "/model" overrides for one turn.
func TestRoutingPolicyHotReload(t *testing.T) {
	home := t.TempDir()
	policy := filepath.Join(home, "routing.yaml")
	// The file is replaced whole (written beside it, then renamed), as
	// editors save: a poll between a truncation and the write would
	// load an empty policy, a version of its own.
	writePolicy := func(s string) {
		tmp := policy + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, policy); err != nil {
			t.Fatal(err)
		}
	}
	writePolicy("rules:\n  - name: short\n    when: {max_chars: 12}\n    model: builtin:demo\n")
	h := servertest.Start(t, home, func(c *config.Config) { c.RoutingPoll = 10 * time.Millisecond })
	sid := h.CreateSession()
	c := streamtest.Attach(t, h.URL, sid)
	c.Subscribe("preset:full", nil, false)
	c.Read(wait)

	turn := h.Submit(sid, "/echo short")
	r1 := routeOf(t, c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn)))
	if r1["reason"] != "rule:short" || r1["model"] != "builtin:demo" {
		t.Fatalf("route %v", r1)
	}
	turn = h.Submit(sid, "/echo this one is long enough")
	r2 := routeOf(t, c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn)))
	if r2["reason"] != "session_model" || r2["policy_version"] != r1["policy_version"] {
		t.Fatalf("route %v", r2)
	}

	writePolicy("default: builtin:demo\n")
	reloaded := c.Events(wait, streamtest.UntilType(event.RoutingPolicyReloaded, ""))
	p := payloadOf(t, reloaded[len(reloaded)-1])
	if p["policy_version"] == r1["policy_version"] || p["policy_version"] == "" {
		t.Fatalf("reload payload %v", p)
	}
	// A snapshot and the session summary report the new version too.
	c2 := streamtest.Attach(t, h.URL, sid)
	c2.Subscribe("preset:chat", nil, true)
	c2.Read(wait)
	snap := c2.Read(wait)
	var sum struct {
		RoutingPolicyVersion string `json:"routing_policy_version"`
	}
	json.Unmarshal(snap.Snap.Session, &sum)
	var got struct {
		Session struct {
			RoutingPolicyVersion string `json:"routing_policy_version"`
		} `json:"session"`
	}
	h.Do("GET", "/sessions/"+sid, nil, &got)
	if sum.RoutingPolicyVersion != p["policy_version"] || got.Session.RoutingPolicyVersion != p["policy_version"] {
		t.Fatalf("snapshot %q, summary %q, want %v", sum.RoutingPolicyVersion, got.Session.RoutingPolicyVersion, p["policy_version"])
	}
	turn = h.Submit(sid, "/echo short")
	r3 := routeOf(t, c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn)))
	if r3["reason"] != "default" || r3["policy_version"] != p["policy_version"] {
		t.Fatalf("route after reload %v", r3)
	}

	writePolicy("rules: [oops")
	warn := c.Events(wait, streamtest.UntilType(event.BusHandlerWarning, ""))
	if w := payloadOf(t, warn[len(warn)-1]); w["reason"] != "routing_policy_invalid" {
		t.Fatalf("warning %v", w)
	}
	turn = h.Submit(sid, "/model builtin:demo /echo still routed")
	evs := c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
	r4 := routeOf(t, evs)
	if r4["reason"] != "slash_command" || r4["policy_version"] != p["policy_version"] {
		t.Fatalf("route with a broken file and /model %v", r4)
	}
	started := payloadOf(t, evs[0])
	if um := started["user_message"].(map[string]any); um["content"].([]any)[0].(map[string]any)["text"] != "/echo still routed" {
		t.Fatalf("user message %v", um)
	}
	var e map[string]map[string]string
	if st := h.Do("POST", "/sessions/"+sid+"/turns", map[string]string{"content": "/model nope:x hello"}, &e); st != 400 {
		t.Fatalf("unknown model override: %d %v", st, e)
	}
}
