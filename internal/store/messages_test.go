package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/message"
)

func testMessage(session string, i int) message.Message {
	m := message.Message{
		ID:        fmt.Sprintf("msg_%s_%04d", session, i),
		SessionID: session,
		TurnID:    "turn_1",
		Role:      message.RoleUser,
		Content:   []message.Block{message.Text(fmt.Sprintf("hello %d", i))},
		Status:    message.StatusComplete,
		CreatedAt: time.Unix(1700000000, int64(i)).UTC(),
	}
	if i%2 == 1 {
		m.Role = message.RoleAssistant
		m.Model = "claude-sonnet-4-5"
		m.Usage = &message.Usage{InputTokens: 10, OutputTokens: int64(i), CostUSD: 0.25}
		m.Content = append(m.Content,
			message.Block{Type: message.BlockThinking, Thinking: "hmm", Signature: "sig"},
			message.Block{Type: message.BlockToolUse, ID: "toolu_1", Name: "read", Input: json.RawMessage(`{"path":"a"}`)},
		)
	}
	return m
}

func msgIDs(ms []message.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestMessagesRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	var want []message.Message
	var ops []Op
	for i := range 5 {
		m := testMessage("sess_a", i)
		want = append(want, m)
		ops = append(ops, PutMessage{Message: m})
	}
	ops = append(ops, PutMessage{Message: testMessage("sess_b", 0)})
	if err := s.Apply(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	got, more, err := s.Messages(ctx, "sess_a", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if more || !reflect.DeepEqual(got, want) {
		t.Fatalf("Messages = %+v (more %v), want %+v", got, more, want)
	}
	m, err := s.Message(ctx, want[3].ID)
	if err != nil || !reflect.DeepEqual(m, want[3]) {
		t.Fatalf("Message = %+v, %v", m, err)
	}
	if _, err := s.Message(ctx, "msg_none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Message(unknown): %v", err)
	}

	// Replacing a message keeps its position.
	re := want[1]
	re.Status = message.StatusCancelled
	re.Content = []message.Block{message.Text("edited")}
	re.Usage = nil
	if err := s.Apply(ctx, PutMessage{Message: re}, PutMessage{Message: testMessage("sess_a", 5)}); err != nil {
		t.Fatal(err)
	}
	got, _, err = s.Messages(ctx, "sess_a", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(msgIDs(got), msgIDs(append(want, testMessage("sess_a", 5)))) {
		t.Fatalf("order after replace: %v", msgIDs(got))
	}
	if !reflect.DeepEqual(got[1], re) {
		t.Fatalf("replaced message = %+v, want %+v", got[1], re)
	}

	// Paging.
	page, more, err := s.Messages(ctx, "sess_a", "", 2)
	if err != nil || !more || !slices.Equal(msgIDs(page), msgIDs(got[4:6])) {
		t.Fatalf("newest page = %v, more %v, %v", msgIDs(page), more, err)
	}
	page, more, err = s.Messages(ctx, "sess_a", got[2].ID, 2)
	if err != nil || more || !slices.Equal(msgIDs(page), msgIDs(got[0:2])) {
		t.Fatalf("oldest page = %v, more %v, %v", msgIDs(page), more, err)
	}
	page, more, err = s.Messages(ctx, "sess_a", got[0].ID, 2)
	if err != nil || more || len(page) != 0 {
		t.Fatalf("before first = %v, more %v, %v", msgIDs(page), more, err)
	}
	if _, _, err := s.Messages(ctx, "sess_a", "msg_none", 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown before: %v", err)
	}
	if _, _, err := s.Messages(ctx, "sess_a", "msg_sess_b_0000", 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before from another session: %v", err)
	}
	page, more, err = s.Messages(ctx, "sess_none", "", 2)
	if err != nil || more || len(page) != 0 {
		t.Fatalf("unknown session = %v, more %v, %v", msgIDs(page), more, err)
	}
}

// TestMessagesPagingProperty walks every session back page by page and
// checks every message is seen exactly once, in insertion order, with
// hasMore true exactly when older ones remain.
func TestMessagesPagingProperty(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	run := 0
	rapid.Check(t, func(t *rapid.T) {
		run++
		session := fmt.Sprintf("sess_%d", run)
		n := rapid.IntRange(0, 40).Draw(t, "messages")
		// Some puts replace an earlier message instead of adding one.
		var order []string
		var ops []Op
		for i := range n {
			if len(order) > 0 && rapid.IntRange(0, 4).Draw(t, "replace") == 0 {
				j := rapid.IntRange(0, len(order)-1).Draw(t, "which")
				m := testMessage(session, j)
				m.Content = []message.Block{message.Text(fmt.Sprintf("edit %d", i))}
				ops = append(ops, PutMessage{Message: m})
				continue
			}
			ops = append(ops, PutMessage{Message: testMessage(session, len(order))})
			order = append(order, testMessage(session, len(order)).ID)
		}
		if err := s.Apply(ctx, ops...); err != nil {
			t.Fatal(err)
		}
		limit := rapid.IntRange(1, 12).Draw(t, "limit")

		var seen []string
		before := ""
		for {
			page, more, err := s.Messages(ctx, session, before, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit {
				t.Fatalf("page of %d > limit %d", len(page), limit)
			}
			seen = append(msgIDs(page), seen...)
			if wantMore := len(seen) < len(order); more != wantMore {
				t.Fatalf("hasMore = %v after %d of %d", more, len(seen), len(order))
			}
			if !more {
				break
			}
			if len(page) != limit {
				t.Fatalf("short page of %d with more", len(page))
			}
			before = page[0].ID
		}
		if !slices.Equal(seen, order) {
			t.Fatalf("walked %v, want %v", seen, order)
		}
	})
}
