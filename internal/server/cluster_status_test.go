package server_test

import (
	"net/http"
	"testing"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// TestClusterStatusSingleNode: GET /cluster on a server started without
// --nats answers 404 not_clustered, with a message that says why.
func TestClusterStatusSingleNode(t *testing.T) {
	h := servertest.Start(t, "")
	var e protocol.HTTPError
	if st := h.Do(http.MethodGet, "/cluster", nil, &e); st != http.StatusNotFound || e.Error.Code != protocol.CodeNotClustered || e.Error.Message == "" {
		t.Fatalf("GET /cluster single-node: %d %+v, want 404 not_clustered", st, e)
	}
	if st := h.Do(http.MethodPost, "/cluster", map[string]string{}, nil); st != http.StatusMethodNotAllowed {
		t.Fatalf("POST /cluster: %d, want 405", st)
	}
}
