package clustertest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

func clusterStatus(t *testing.T, h *servertest.Harness) protocol.ClusterStatus {
	t.Helper()
	var st protocol.ClusterStatus
	if code := h.Do(http.MethodGet, "/cluster", nil, &st); code != http.StatusOK {
		t.Fatalf("GET /cluster on %s: %d", h.Config.Node, code)
	}
	return st
}

func nodeNames(st protocol.ClusterStatus) []string {
	var out []string
	for _, n := range st.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// TestClusterStatusShowsNodesLeasesAndLag: GET /cluster on any node
// lists every node (its address, start, version, applied sequence and
// lag, the trees it owns, the answering node marked), every tree's
// lease (owner, revision, age) and the log's catalog tail; `metis
// cluster status` prints it as tables, or as JSON with --json; a node
// that shuts down leaves the list and its trees' leases go.
func TestClusterStatusShowsNodesLeasesAndLag(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sa, sb := a.CreateSession(), b.CreateSession()

	var st protocol.ClusterStatus
	servertest.WaitFor(t, "both nodes announced with their addresses, caught up", func() bool {
		st = clusterStatus(t, a)
		return len(st.Nodes) == 2 && st.Nodes[0].Address == a.URL && st.Nodes[1].Address == b.URL &&
			st.Nodes[0].Lag == 0 && st.Nodes[1].Lag == 0
	})
	if st.Node != "node-a" || st.Stream != "METIS_EVENTS" || st.NATS == "" || st.LastCatalogSeq == 0 || st.At.IsZero() {
		t.Fatalf("status header: %+v", st)
	}
	na, nb := st.Nodes[0], st.Nodes[1]
	if !na.Self || nb.Self || na.AppliedSeq != st.LastCatalogSeq || na.Started.IsZero() || na.Version == "" || nb.Heartbeat.IsZero() {
		t.Fatalf("nodes: %+v", st.Nodes)
	}
	if na.OwnedTrees != 1 || nb.OwnedTrees != 1 {
		t.Fatalf("trees owned: node-a %d, node-b %d; want 1 each", na.OwnedTrees, nb.OwnedTrees)
	}
	owners := map[string]string{}
	for _, l := range st.Leases {
		if l.Revision == 0 || l.AcquiredAt.IsZero() || l.AgeSeconds < 0 {
			t.Fatalf("lease %+v", l)
		}
		owners[l.Tree] = l.Node
	}
	if len(owners) != 2 || owners[sa] != "node-a" || owners[sb] != "node-b" || st.LeasesTruncated {
		t.Fatalf("leases %+v, want %s on node-a and %s on node-b", st.Leases, sa, sb)
	}
	// Node b answers the same cluster, as itself.
	if sb := clusterStatus(t, b); sb.Node != "node-b" || !slices.Equal(nodeNames(sb), []string{"node-a", "node-b"}) || !sb.Nodes[1].Self {
		t.Fatalf("node b's status: %+v", sb)
	}

	// The command's tables.
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}
	if code := cli.Cluster(context.Background(), []string{"status", "--server", a.URL}, env); code != 0 {
		t.Fatalf("metis cluster status: exit %d: %s", code, errOut.String())
	}
	rows := map[string][]string{}
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	if r := rows["node-a"]; len(r) < 3 || r[1] != "*" || r[2] != a.URL {
		t.Errorf("node-a's row %q", r)
	}
	if r := rows["node-b"]; len(r) < 2 || r[1] != b.URL {
		t.Errorf("node-b's row %q", r)
	}
	if r := rows[sa]; len(r) < 2 || r[1] != "node-a" {
		t.Errorf("%s's row %q", sa, r)
	}
	if r := rows[sb]; len(r) < 2 || r[1] != "node-b" {
		t.Errorf("%s's row %q", sb, r)
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out.String())
	}
	out.Reset()
	if code := cli.Cluster(context.Background(), []string{"status", "--json", "--server", b.URL}, env); code != 0 {
		t.Fatalf("metis cluster status --json: exit %d: %s", code, errOut.String())
	}
	var js protocol.ClusterStatus
	if err := json.Unmarshal(out.Bytes(), &js); err != nil || js.Node != "node-b" || len(js.Nodes) != 2 || len(js.Leases) != 2 {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}

	// Node b leaves: it is gone from the list, and so is its lease.
	b.Stop()
	st = clusterStatus(t, a)
	if !slices.Equal(nodeNames(st), []string{"node-a"}) || len(st.Leases) != 1 || st.Leases[0].Tree != sa {
		t.Fatalf("after node b stopped: nodes %v, leases %+v", nodeNames(st), st.Leases)
	}
}
