package session_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
)

// recordingDeleter is a session.Deleter that deletes locally (del) and
// then fails with err, as a cluster store that could not publish the
// deletion record does.
type recordingDeleter struct {
	mu       sync.Mutex
	sessions []string
	err      error
}

func (d *recordingDeleter) DeleteTree(ctx context.Context, sessionID string, del func(context.Context) error) error {
	d.mu.Lock()
	d.sessions = append(d.sessions, sessionID)
	d.mu.Unlock()
	if err := del(ctx); err != nil {
		return err
	}
	return d.err
}

// TestDeleteGoesThroughTheDeleter: with a Deleter (cluster mode) a
// deletion is carried out through it, which deletes from the store with
// the function it is given; if the Deleter then fails (the deletion
// could not reach the other nodes), Delete says so, but the session is
// gone here and its background commands are stopped all the same. A
// second Delete is ErrNotFound, before the Deleter is asked again.
func TestDeleteGoesThroughTheDeleter(t *testing.T) {
	for _, fail := range []bool{false, true} {
		d := &recordingDeleter{}
		if fail {
			d.err = errors.New("the log is unreachable")
		}
		var mu sync.Mutex
		var ended []string
		f := newFaultRig(t, func(c *session.Config) {
			c.Deleter = d
			c.EndBackground = func(_ context.Context, sid, _ string) error {
				mu.Lock()
				defer mu.Unlock()
				ended = append(ended, sid)
				return nil
			}
		})
		ctx := context.Background()
		err := f.m.Delete(ctx, f.sid)
		if fail != (err != nil) || (fail && !errors.Is(err, d.err)) {
			t.Fatalf("fail %v: Delete = %v", fail, err)
		}
		if len(d.sessions) != 1 || d.sessions[0] != f.sid {
			t.Fatalf("the Deleter was asked for %v, want [%s]", d.sessions, f.sid)
		}
		if _, err := f.st.Session(ctx, f.sid); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("fail %v: the session after Delete: %v", fail, err)
		}
		mu.Lock()
		if len(ended) != 1 || ended[0] != f.sid {
			t.Errorf("fail %v: background commands ended for %v, want [%s]", fail, ended, f.sid)
		}
		mu.Unlock()
		if err := f.m.Delete(ctx, f.sid); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("a second Delete: %v, want ErrNotFound", err)
		}
		if len(d.sessions) != 1 {
			t.Errorf("the Deleter was asked again: %v", d.sessions)
		}
	}
}
