package cluster_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
)

// observed records what a router's Observe reports.
type observed struct {
	mu  sync.Mutex
	got []string
}

func (o *observed) add(kind, result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, kind+" "+result)
}

func (o *observed) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

// TestFeedbackFromAnyNodeReachesTheOwner: a turn's feedback sent from a
// node that does not own the tree reaches the owner's handler, its
// refusal comes back with the owner's code, and once nobody serves the
// tree it fails with ErrNoOwner. The router reports each request's
// kind and result.
func TestFeedbackFromAnyNodeReachesTheOwner(t *testing.T) {
	s := startServer(t)
	cfg := cluster.LeaseConfig{TTL: time.Minute}
	a, b := newNode(t, s, "node-a", cfg), newNode(t, s, "node-b", cfg)
	var seen observed
	b.router.Observe(seen.add)
	tree := newSessionID()

	owner := newTurns("node-a")
	oa, serving := a.serve(t, tree, owner)

	rep, err := b.router.Feedback(ctx(t), tree, cluster.FeedbackRequest{SessionID: tree, TurnID: "turn_1", Rating: "up", Comment: "good"})
	if err != nil || rep.EventID == "" {
		t.Fatalf("feedback via node-b = %+v, %v", rep, err)
	}
	_, err = b.router.Feedback(ctx(t), tree, cluster.FeedbackRequest{SessionID: tree, TurnID: "turn_1", Rating: "sideways"})
	var re *cluster.RemoteError
	if !errors.As(err, &re) || re.Code != "invalid_request" || re.Message != `rating must be "up" or "down"` {
		t.Fatalf("bad rating via node-b: %v, want the owner's invalid_request", err)
	}
	want := []string{"feedback turn_1 up good", "feedback turn_1 sideways "}
	if got := owner.calls(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("owner served %q, want %q", got, want)
	}

	if err := oa.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	serving.Stop()
	if _, err := b.router.Feedback(ctx(t), tree, cluster.FeedbackRequest{SessionID: tree, TurnID: "turn_1", Rating: "up"}); !errors.Is(err, cluster.ErrNoOwner) {
		t.Fatalf("feedback with no owner: %v, want ErrNoOwner", err)
	}
	if _, err := b.router.Submit(ctx(t), tree, cluster.SubmitRequest{SessionID: tree, Content: "x"}); !errors.Is(err, cluster.ErrNoOwner) {
		t.Fatalf("submit with no owner: %v, want ErrNoOwner", err)
	}
	wantSeen := []string{"feedback ok", "feedback refused", "feedback no_owner", "submit no_owner"}
	if got := seen.list(); !slices.Equal(got, wantSeen) {
		t.Fatalf("observed %q, want %q", got, wantSeen)
	}
}

func FuzzDecodeFeedbackRequest(f *testing.F) {
	f.Add([]byte(`{"session_id":"sess_1","turn_id":"turn_1","rating":"up","comment":"fine"}`))
	f.Add([]byte(`{"session_id":"sess_1","turn_id":"turn_1","rating":"down"}`))
	f.Add([]byte(`{"session_id":"a.b","turn_id":""}`))
	f.Add([]byte(`{"session_id":"_owner","turn_id":"t","rating":"up"}`))
	f.Add([]byte(`{"session_id":"s","turn_id":"t","comment":"\ud800"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := cluster.DecodeFeedbackRequest(b)
		if err != nil {
			if !isBadRequest(err) {
				t.Fatalf("error %v is not a bad_request", err)
			}
			return
		}
		if cluster.ValidToken(r.SessionID) != nil || r.TurnID == "" {
			t.Fatalf("accepted %+v", r)
		}
		// What was accepted encodes again (the owner answers from it).
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("accepted %+v does not encode: %v", r, err)
		}
	})
}
