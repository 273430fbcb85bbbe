package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestSessions(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	t0 := time.Unix(1700000000, 0).UTC()
	parent := Session{ID: "sess_p", WorkspacePath: "/w", ActiveModel: "m1", RoutingPolicyVersion: "v1", CreatedAt: t0, LastActivityAt: t0, Mode: "default"}
	child1 := Session{ID: "sess_c1", ParentSessionID: "sess_p", WorkspacePath: "/w", ActiveModel: "m2", CreatedAt: t0.Add(2 * time.Second),
		LastActivityAt: t0.Add(2 * time.Second), Mode: "default"}
	child2 := Session{ID: "sess_c2", ParentSessionID: "sess_p", WorkspacePath: "/w", CreatedAt: t0.Add(time.Second), LastActivityAt: t0.Add(time.Second), Mode: "default"}
	if err := s.Apply(ctx, CreateSession{Session: parent}, CreateSession{Session: child1}, CreateSession{Session: child2}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(ctx, "sess_p")
	if err != nil || !reflect.DeepEqual(got, parent) {
		t.Fatalf("Session = %+v, %v; want %+v", got, err, parent)
	}
	if _, err := s.Session(ctx, "sess_none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Session(unknown): %v", err)
	}
	if err := s.Apply(ctx, CreateSession{Session: parent}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate session: %v", err)
	}

	all, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Session{parent, child2, child1}; !reflect.DeepEqual(all, want) {
		t.Fatalf("Sessions = %+v, want creation order %+v", all, want)
	}
	kids, err := s.Children(ctx, "sess_p")
	if err != nil || !reflect.DeepEqual(kids, []Session{child2, child1}) {
		t.Fatalf("Children = %+v, %v", kids, err)
	}
	if kids, err := s.Children(ctx, ""); err != nil || len(kids) != 0 {
		t.Fatalf("Children(\"\") = %+v, %v", kids, err)
	}

	// Updates change the non-empty fields only; usage accumulates.
	ops := []Op{
		UpdateSession{ID: "sess_p", ActiveModel: "m9"},
		UpdateSession{ID: "sess_p", RoutingPolicyVersion: "v2"},
		AddUsage{SessionID: "sess_p", CostUSD: 0.5, Turns: 1},
		AddUsage{SessionID: "sess_p", CostUSD: 0.25, Turns: 2},
	}
	if err := s.Apply(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	got, err = s.Session(ctx, "sess_p")
	if err != nil {
		t.Fatal(err)
	}
	if got.ActiveModel != "m9" || got.RoutingPolicyVersion != "v2" || got.CostUSD != 0.75 || got.TurnCount != 3 {
		t.Fatalf("after updates: %+v", got)
	}

	// An op on a missing session fails its whole group.
	err = s.Apply(ctx, AddUsage{SessionID: "sess_p", CostUSD: 1, Turns: 1}, AddUsage{SessionID: "sess_none", Turns: 1})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("AddUsage(unknown): %v", err)
	}
	if got, _ := s.Session(ctx, "sess_p"); got.TurnCount != 3 {
		t.Fatalf("failed group partly applied: %+v", got)
	}
}

func TestTurnsAndToolCalls(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	t0 := time.Unix(1700000000, 123).UTC()
	open1 := Turn{ID: "turn_1", SessionID: "sess_a", Status: TurnInFlight, StartedAt: t0}
	open2 := Turn{ID: "turn_2", SessionID: "sess_b", Status: TurnInFlight, StartedAt: t0.Add(time.Second)}
	done := Turn{ID: "turn_0", SessionID: "sess_a", Status: TurnCompleted, StartedAt: t0.Add(-time.Minute), EndedAt: t0}
	if err := s.Apply(ctx, PutTurn{Turn: open2}, PutTurn{Turn: open1}, PutTurn{Turn: done}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Turn(ctx, "turn_0")
	if err != nil || !reflect.DeepEqual(got, done) {
		t.Fatalf("Turn = %+v, %v; want %+v", got, err, done)
	}
	if _, err := s.Turn(ctx, "turn_none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Turn(unknown): %v", err)
	}
	open, err := s.OpenTurns(ctx)
	if err != nil || !reflect.DeepEqual(open, []Turn{open1, open2}) {
		t.Fatalf("OpenTurns = %+v, %v", open, err)
	}
	// Closing a turn replaces its row.
	open1.Status, open1.Reason, open1.EndedAt = TurnCancelled, "user", t0.Add(time.Minute)
	if err := s.Apply(ctx, PutTurn{Turn: open1}); err != nil {
		t.Fatal(err)
	}
	open, err = s.OpenTurns(ctx)
	if err != nil || !reflect.DeepEqual(open, []Turn{open2}) {
		t.Fatalf("OpenTurns after close = %+v, %v", open, err)
	}
	if got, _ := s.Turn(ctx, "turn_1"); !reflect.DeepEqual(got, open1) {
		t.Fatalf("closed turn = %+v, want %+v", got, open1)
	}

	c1 := ToolCall{ID: "toolu_1", SessionID: "sess_a", TurnID: "turn_1", MessageID: "msg_1", Name: "read",
		Input: json.RawMessage(`{"path":"a.go"}`), Status: ToolRunning, CreatedAt: t0, UpdatedAt: t0}
	c2 := ToolCall{ID: "toolu_2", SessionID: "sess_a", TurnID: "turn_1", MessageID: "msg_1", Name: "bash",
		Status: ToolPending, CreatedAt: t0.Add(time.Millisecond), UpdatedAt: t0.Add(time.Millisecond)}
	other := ToolCall{ID: "toolu_3", SessionID: "sess_b", TurnID: "turn_2", Name: "x", Status: ToolPending, CreatedAt: t0, UpdatedAt: t0}
	if err := s.Apply(ctx, PutToolCall{Call: c2}, PutToolCall{Call: c1}, PutToolCall{Call: other}); err != nil {
		t.Fatal(err)
	}
	c1.Status, c1.Result, c1.IsError, c1.ErrorClass, c1.ErrorMessage, c1.UpdatedAt =
		ToolFailed, "boom", true, "io", "read failed", t0.Add(time.Second)
	if err := s.Apply(ctx, PutToolCall{Call: c1}); err != nil {
		t.Fatal(err)
	}
	calls, err := s.ToolCalls(ctx, "turn_1")
	if err != nil || !reflect.DeepEqual(calls, []ToolCall{c1, c2}) {
		t.Fatalf("ToolCalls = %+v, %v; want %+v", calls, err, []ToolCall{c1, c2})
	}
	got1, err := s.ToolCall(ctx, "sess_b", "", "toolu_3")
	if err != nil || !reflect.DeepEqual(got1, other) {
		t.Fatalf("ToolCall = %+v, %v", got1, err)
	}
	if _, err := s.ToolCall(ctx, "sess_b", "", "toolu_none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ToolCall(unknown): %v", err)
	}
	if err := s.Apply(ctx, PutToolCall{Call: ToolCall{ID: "t", SessionID: "s", Status: ToolPending, Input: json.RawMessage("{")}}); err == nil {
		t.Fatal("invalid input JSON: no error")
	}
}

func TestCursors(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	if seq, err := s.Cursor(ctx, "acc"); err != nil || seq != 0 {
		t.Fatalf("Cursor(unset) = %d, %v", seq, err)
	}
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_a", CreatedAt: time.Now()}},
		AddUsage{SessionID: "sess_a", Turns: 1}, SetCursor{Name: "acc", Seq: 7}); err != nil {
		t.Fatal(err)
	}
	// The cursor moves atomically with the group: a failing group
	// leaves it.
	if err := s.Apply(ctx, AddUsage{SessionID: "sess_none"}, SetCursor{Name: "acc", Seq: 9}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("failing group: %v", err)
	}
	if err := s.Apply(ctx, &SetCursor{Name: "other", Seq: 3}); err != nil {
		t.Fatal(err)
	}
	if seq, err := s.Cursor(ctx, "acc"); err != nil || seq != 7 {
		t.Fatalf("Cursor = %d, %v; want 7", seq, err)
	}
	if err := s.Apply(ctx, SetCursor{Name: "acc", Seq: 12}); err != nil {
		t.Fatal(err)
	}
	if seq, err := s.Cursor(ctx, "acc"); err != nil || seq != 12 {
		t.Fatalf("Cursor = %d, %v; want 12", seq, err)
	}
	if err := s.Apply(ctx, SetCursor{Seq: 1}); err == nil {
		t.Fatal("empty cursor name: no error")
	}
}
