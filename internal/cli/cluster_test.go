package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// TestClusterStatusOfASingleNodeServer: a server without --nats has no
// cluster; the command says so and fails.
func TestClusterStatusOfASingleNodeServer(t *testing.T) {
	h := servertest.Start(t, "")
	var out, errOut bytes.Buffer
	code := cli.Cluster(context.Background(), []string{"status", "--server", h.URL}, cli.Env{Stdout: &out, Stderr: &errOut})
	if code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "runs single-node") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and a single-node error", code, out.String(), errOut.String())
	}
}

// TestClusterStatusUsage: a missing or unknown subcommand, or a stray
// argument, is a usage error.
func TestClusterStatusUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"stats"}, {"status", "extra"}, {"status", "--nope"}} {
		var out, errOut bytes.Buffer
		if code := cli.Cluster(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errOut}); code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, errOut.String())
		}
	}
}

// fixedStatus serves one GET /cluster answer.
func fixedStatus(t *testing.T, st protocol.ClusterStatus) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/cluster" {
			protocol.WriteHTTPError(w, http.StatusNotFound, protocol.CodeNotFound, r.URL.Path)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestClusterStatusTables: the nodes table (the answering node starred,
// heartbeat and uptime as ages, applied sequence, lag, trees owned) and
// the leases table (tree, owner, revision, age); strings from the
// server cannot break the columns; --json prints the answer itself.
func TestClusterStatusTables(t *testing.T) {
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	st := protocol.ClusterStatus{Node: "node-a", NATS: "metis-nats", Stream: "METIS_EVENTS", At: at, LastCatalogSeq: 120,
		Nodes: []protocol.ClusterNode{
			{Name: "node-a", Address: "http://10.0.0.1:8421", Version: "v1.0.0", Started: at.Add(-2*time.Hour - 10*time.Minute),
				Heartbeat: at.Add(-time.Second), AppliedSeq: 120, OwnedTrees: 1, Self: true},
			{Name: "node-b", Address: "http://10.0.0.2:8421\n\tevil", Version: "", Started: at.Add(-5*time.Minute - 30*time.Second),
				Heartbeat: at.Add(-2 * time.Second), AppliedSeq: 117, Lag: 3, OwnedTrees: 1},
		},
		Leases: []protocol.ClusterLease{
			{Tree: "sess_01A", Node: "node-a", Revision: 17, AgeSeconds: 303},
			{Tree: "sess_01B", Node: "node-b", Revision: 4, AgeSeconds: 0.25},
		},
		LeasesTruncated: true,
	}
	url := fixedStatus(t, st)
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}
	if code := cli.Cluster(context.Background(), []string{"status", "--server", url}, env); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	text := out.String()
	want := []string{
		"cluster metis-nats, stream METIS_EVENTS: 2 nodes, 2 leases; catalog tail at sequence 120 (answered by node-a at 2026-11-24T08:00:00Z)",
		"NODE      ADDRESS                     VERSION  UP     HEARTBEAT  APPLIED  LAG  TREES",
		"node-a *  http://10.0.0.1:8421        v1.0.0   2h10m  1s ago     120      0    1",
		"node-b    http://10.0.0.2:8421  evil  -        5m30s  2s ago     117      3    1",
		"TREE      OWNER   REVISION  AGE",
		"sess_01A  node-a  17        5m3s",
		"sess_01B  node-b  4         250ms",
		"(only the first 2 leases are listed)",
	}
	lines := strings.Split(text, "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			if strings.TrimRight(l, " ") == w {
				found = true
			}
		}
		if !found {
			t.Errorf("output lacks the line %q", w)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}

	out.Reset()
	if code := cli.Cluster(context.Background(), []string{"status", "--json", "--server", url}, env); code != 0 {
		t.Fatalf("--json exit %d: %s", code, errOut.String())
	}
	var got protocol.ClusterStatus
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Node != "node-a" || len(got.Nodes) != 2 || got.Nodes[1].Lag != 3 || len(got.Leases) != 2 {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
}
