package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/metis-agent/metis"

// coreRules lists the core: the packages that know nothing of
// transports. "x/..." covers x and everything under it.
var coreRules = []string{
	"internal/agent",
	"internal/attach",
	"internal/bus",
	"internal/checkpoint", // workspace checkpoints: snapshots in a git directory of metis's own
	"internal/compact",    // long sessions: the model's view, compaction plans
	"internal/config",
	"internal/cost",
	"internal/delegate",
	"internal/editor", // the editors clients attach to sessions (the file tools' other path)
	"internal/event",
	"internal/cluster",     // scale-out: the JetStream log, leases, projection
	"internal/clusternode", // scale-out: a node's runtime (ownership, failover, routing, status)
	"internal/feed",        // the transport-neutral subscription core
	"internal/hub",
	"internal/images", // image validation by content, the image-bytes cache
	"internal/login",  // browser login sessions and the attempts limit
	"internal/mcp",    // MCP servers and their tools (the MCP Go SDK is the protocol, not a transport of metis's)
	"internal/message",
	"internal/metrics",
	"internal/model/...",
	"internal/permission", // the tool-call policy: modes and rules
	"internal/price",
	"internal/routing",
	"internal/safefile",
	"internal/sandbox", // tool processes' isolation: Landlock, capabilities, the shield
	"internal/session",
	"internal/store",
	"internal/token",
	"internal/tool",
	"internal/workspace", // which directories may be workspaces
}

// roots are the composition roots: they may import anything.
var roots = []string{"cmd/metis", "internal/server"}

// testSupport packages are imported by tests only, and may import
// anything.
var testSupport = []string{"internal/servertest", "internal/streamtest", "internal/spectest", "internal/natstest", "internal/benchtest", "internal/benchtest/cpu"}

// public packages and the metis packages each may import.
var public = map[string][]string{
	"protocol": nil,
	"client":   {"protocol"},
}

// coreForbidden are module path prefixes the core may not depend on:
// transports and user interfaces belong to the edges.
var coreForbidden = []string{
	"github.com/coder/websocket",
	"github.com/gorilla/websocket",
	"github.com/tmaxmax/go-sse",
	"charm.land/",
	"github.com/charmbracelet/",
	"github.com/coder/acp-go-sdk",
}

// coreOrder forbids imports inside the core that would invert its
// rings: the live-delivery side (hub) serves events and the store's
// rows, and knows nothing of who produces them.
var coreOrder = map[string][]string{
	"internal/hub":     {"internal/session", "internal/agent", "internal/delegate"},
	"internal/event":   {"internal/store", "internal/bus"},
	"internal/message": {"internal/event", "internal/store"},
	"internal/store":   {"internal/bus", "internal/session", "internal/agent"},
	"internal/bus":     {"internal/session", "internal/agent"},
	// The price table is configuration; the accumulator is the core's
	// running totals, which configuration has no business with.
	"internal/config": {"internal/cost"},
	"internal/price":  {"internal/cost", "internal/bus", "internal/store"},
	// MCP servers are a source of tools: the loop asks them, never the
	// reverse, and the tools know nothing of where tools come from.
	"internal/mcp":  {"internal/agent", "internal/session", "internal/bus", "internal/store"},
	"internal/tool": {"internal/mcp"},
}

// edgeExceptions are edge-to-edge imports allowed, with their reason.
var edgeExceptions = map[[2]string]string{
	// cli holds what every client command shares (Env, the server URL and
	// token flags); the TUI is a client command.
	{"internal/tui", "internal/cli"}: "client commands share cli's server selection",
}

type kind int

const (
	kindEdge kind = iota
	kindCore
	kindRoot
	kindTestSupport
	kindPublic
)

func (k kind) String() string {
	return [...]string{"edge", "core", "composition root", "test support", "public"}[k]
}

func classify(rel string) kind {
	switch {
	case slices.Contains(roots, rel):
		return kindRoot
	case slices.Contains(testSupport, rel):
		return kindTestSupport
	}
	if _, ok := public[rel]; ok {
		return kindPublic
	}
	for _, r := range coreRules {
		if sub, ok := strings.CutSuffix(r, "/..."); ok {
			if rel == sub || strings.HasPrefix(rel, sub+"/") {
				return kindCore
			}
		} else if rel == r {
			return kindCore
		}
	}
	return kindEdge
}

type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

// graph is the import graph of the module's packages and everything they
// depend on, tests excluded.
type graph map[string]*pkg

func load(t *testing.T) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Standard", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		g[p.ImportPath] = p
	}
	if len(g) == 0 {
		t.Fatal("go list listed no packages")
	}
	return g
}

func rel(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	return strings.CutPrefix(path, module+"/")
}

// chain returns the shortest import chain from one package to the first
// package bad accepts, or nil. Only the module's own packages are
// walked: what a third-party library imports in turn (the OpenAI SDK
// has a WebSocket package of its own) is that library's business.
func (g graph) chain(from string, bad func(string) bool) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		p := g[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = cur
			if bad(imp) {
				var out []string
				for at := imp; at != ""; at = prev[at] {
					out = append(out, at)
				}
				slices.Reverse(out)
				return out
			}
			if _, ours := rel(imp); ours {
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// violations checks every package of the module against the rules and
// returns one line per broken rule, with its import chain.
func violations(g graph) []string {
	var out []string
	var names []string
	for path := range g {
		if _, ok := rel(path); ok {
			names = append(names, path)
		}
	}
	slices.Sort(names)
	show := func(c []string) string {
		for i, p := range c {
			if r, ok := rel(p); ok {
				c[i] = r
			}
		}
		return strings.Join(c, " → ")
	}
	for _, path := range names {
		r, _ := rel(path)
		k := classify(r)
		// Direct imports of the module's packages, checked by kind.
		for _, imp := range g[path].Imports {
			ir, ok := rel(imp)
			if !ok {
				continue
			}
			ik := classify(ir)
			switch {
			case ik == kindTestSupport && k != kindTestSupport:
				out = append(out, fmt.Sprintf("%s (%s) imports test support: %s", r, k, show([]string{path, imp})))
			case ik == kindRoot && k != kindRoot && k != kindTestSupport:
				out = append(out, fmt.Sprintf("%s (%s) imports a composition root: %s", r, k, show([]string{path, imp})))
			case k == kindPublic && !slices.Contains(public[r], ir):
				out = append(out, fmt.Sprintf("%s (public) may import only %v from metis: %s", r, public[r], show([]string{path, imp})))
			case k == kindCore && slices.Contains(coreOrder[r], ir):
				out = append(out, fmt.Sprintf("%s (core) may not import %s: %s", r, ir, show([]string{path, imp})))
			case k == kindCore && ik != kindCore && ir != "protocol":
				out = append(out, fmt.Sprintf("%s (core) imports the %s %s: %s", r, ik, ir, show([]string{path, imp})))
			case k == kindEdge && ik == kindEdge:
				if _, ok := edgeExceptions[[2]string{r, ir}]; !ok {
					out = append(out, fmt.Sprintf("%s (edge) imports another edge: %s", r, show([]string{path, imp})))
				}
			}
		}
		// protocol: the standard library only, at any depth.
		if r == "protocol" {
			if c := g.chain(path, func(p string) bool { q := g[p]; return q == nil || !q.Standard }); c != nil {
				out = append(out, fmt.Sprintf("protocol imports beyond the standard library: %s", show(c)))
			}
		}
		// The core, through its own packages: no transport library.
		if k == kindCore {
			forbidden := func(p string) bool {
				for _, f := range coreForbidden {
					if strings.HasPrefix(p, f) {
						return true
					}
				}
				return false
			}
			if c := g.chain(path, forbidden); c != nil {
				out = append(out, fmt.Sprintf("%s (%s) depends on a transport or UI library: %s", r, k, show(c)))
			}
		}
	}
	return out
}

// TestLayering: the module's packages keep the dependency rules of
// docs/architecture.md. A failure names the rule and the import chain.
func TestLayering(t *testing.T) {
	g := load(t)
	for _, v := range violations(g) {
		t.Error(v)
	}
	// Every rule names packages that exist (or are expected soon), so a
	// rename does not silently drop a package from the core.
	for _, r := range append(slices.Clone(roots), "protocol", "client", "internal/event", "internal/hub", "internal/session") {
		if _, ok := g[module+"/"+r]; !ok {
			t.Errorf("rule names %s, which go list does not list", r)
		}
	}
}

// TestRulesCatchViolations: the checker reports each kind of broken rule
// on a made-up graph, with the chain that breaks it.
func TestRulesCatchViolations(t *testing.T) {
	m := func(s string) string { return module + "/" + s }
	g := graph{}
	add := func(path string, std bool, imps ...string) {
		g[path] = &pkg{ImportPath: path, Imports: imps, Standard: std}
	}
	add(m("protocol"), false, "encoding/json", "example.com/lib", m("internal/event"))
	add(m("client"), false, m("protocol"), m("internal/hub"))
	add(m("internal/event"), false, m("protocol"))
	add(m("internal/hub"), false, m("internal/event"), m("internal/api"), m("internal/bus"), m("internal/session"))
	add(m("internal/bus"), false, "github.com/coder/websocket")
	add(m("internal/model/openai"), false, "example.com/lib")
	add("example.com/lib", false, "github.com/coder/websocket")
	add("github.com/coder/websocket", false)
	add(m("internal/api"), false, m("internal/session"))
	add(m("internal/session"), false, m("internal/store"))
	add(m("internal/store"), false, m("internal/servertest"))
	add(m("internal/servertest"), false, m("internal/server"))
	add(m("internal/server"), false, m("internal/api"))
	add(m("internal/tui"), false, m("internal/server"), m("internal/cli"), m("internal/acp"))
	add(m("internal/cli"), false, m("client"))
	add(m("internal/acp"), false, m("client"))
	add(m("internal/newedge"), false, m("internal/tui"))
	add("encoding/json", true)

	got := strings.Join(violations(g), "\n")
	for _, want := range []string{
		"protocol (public) may import only [] from metis: protocol → internal/event",
		"client (public) may import only [protocol] from metis: client → internal/hub",
		"protocol imports beyond the standard library: protocol → example.com/lib",
		"internal/hub (core) imports the edge internal/api: internal/hub → internal/api",
		"internal/bus (core) depends on a transport or UI library: internal/bus → github.com/coder/websocket",
		"internal/hub (core) depends on a transport or UI library: internal/hub → internal/bus → github.com/coder/websocket",
		"internal/hub (core) may not import internal/session: internal/hub → internal/session",
		"internal/store (core) imports test support: internal/store → internal/servertest",
		"internal/tui (edge) imports a composition root: internal/tui → internal/server",
		"internal/tui (edge) imports another edge: internal/tui → internal/acp",
		"internal/newedge (edge) imports another edge: internal/newedge → internal/tui",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing violation %q in:\n%s", want, got)
		}
	}
	for _, not := range []string{"internal/tui → internal/cli", "internal/server (", "internal/servertest (", "internal/event (core) imports", "internal/model/openai"} {
		if strings.Contains(got, not) {
			t.Errorf("reported %q, which the rules allow, in:\n%s", not, got)
		}
	}
}
