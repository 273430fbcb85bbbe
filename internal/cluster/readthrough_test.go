package cluster_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/cluster"
	"github.com/metis-agent/metis/internal/event"
)

// TestReadThroughAMessageThatIsGone: a reader asked to read through a
// sequence (the last message on its filter, as the stream's leader
// answered a moment before) returns once it got everything that still
// exists through it, even when that message expired, or was deleted,
// before the reader got there; it used to wait for it until its
// context ended (a node that started following a tree whose newest
// delta expired in that instant hung its client's subscribe).
func TestReadThroughAMessageThatIsGone(t *testing.T) {
	l := openLog(t, connect(t, startServer(t)), cluster.LogConfig{})
	tree := newSessionID()
	g := newEvents(t)
	var seqs []uint64
	var ids []string
	for range 3 {
		d := g.make(tree, event.TextDelta, "turn_1", map[string]any{"text": "x"})
		p, err := l.PublishStreaming(ctx(t), tree, d)
		if err != nil {
			t.Fatal(err)
		}
		seqs, ids = append(seqs, p.Seq), append(ids, d.ID)
	}
	st, err := l.JetStream().Stream(ctx(t), l.Config().Stream)
	if err != nil {
		t.Fatal(err)
	}
	read := func(last uint64) []string {
		t.Helper()
		c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var got []string
		err := l.ReadThrough(c, cluster.StreamingFilter(tree), last, func(e cluster.Entry) error {
			got = append(got, e.Event.ID)
			return nil
		})
		if err != nil {
			t.Fatalf("read through %d: %v", last, err)
		}
		return got
	}
	if got := read(seqs[2]); !slices.Equal(got, ids) {
		t.Fatalf("read through the last message: %v, want %v", got, ids)
	}
	if err := st.DeleteMsg(ctx(t), seqs[2]); err != nil {
		t.Fatal(err)
	}
	if got := read(seqs[2]); !slices.Equal(got, ids[:2]) {
		t.Fatalf("read through a deleted last message: %v, want %v", got, ids[:2])
	}
	if got := read(seqs[1]); !slices.Equal(got, ids[:2]) {
		t.Fatalf("read through the message before it: %v, want %v", got, ids[:2])
	}
	for _, seq := range seqs[:2] {
		if err := st.DeleteMsg(ctx(t), seq); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(seqs[2]); len(got) != 0 {
		t.Fatalf("read through messages that are all gone: %v", got)
	}
}
