package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestSessionsPage: walking the listing page by page, with any page
// sizes, yields every session exactly once, newest first (creation time,
// then id, descending), ties in creation time included; has_more ends
// exactly at the last page; a session removed under the walk does not
// break it.
func TestSessionsPage(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		t0 := time.Unix(1700000000, 0).UTC().Add(time.Duration(round) * time.Hour)
		n := rapid.IntRange(0, 30).Draw(rt, "sessions")
		var all []Session
		for i := range n {
			// Few distinct times, so ties are common.
			at := t0.Add(time.Duration(rapid.IntRange(0, 5).Draw(rt, "at")) * time.Second)
			all = append(all, Session{ID: fmt.Sprintf("sess_%d_%03d", round, i), CreatedAt: at})
		}
		ops := make([]Op, len(all))
		for i, ss := range all {
			ops[i] = CreateSession{Session: ss}
		}
		if err := s.Apply(ctx, ops...); err != nil {
			rt.Fatal(err)
		}
		slices.SortFunc(all, func(a, b Session) int {
			return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
		})
		// Only this round's sessions: they are the newest in the store.
		var got []string
		before := ""
		for pages := 0; ; pages++ {
			limit := rapid.IntRange(1, 7).Draw(rt, "limit")
			p, err := s.SessionsPage(ctx, before, limit)
			if err != nil {
				rt.Fatal(err)
			}
			if len(p.Sessions) > limit {
				rt.Fatalf("page of %d with limit %d", len(p.Sessions), limit)
			}
			for _, ss := range p.Sessions {
				if len(got) == len(all) {
					break // older rounds' sessions follow
				}
				got = append(got, ss.ID)
			}
			if len(got) == len(all) || p.Next == "" {
				if p.Next == "" && len(got) < len(all) {
					rt.Fatalf("listing ended after %d of %d", len(got), len(all))
				}
				break
			}
			if len(p.Sessions) != limit {
				rt.Fatalf("short page of %d (limit %d) before the end", len(p.Sessions), limit)
			}
			before = p.Next
		}
		want := make([]string, len(all))
		for i, ss := range all {
			want[i] = ss.ID
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("walked %v\nwant   %v", got, want)
		}
	})
	// The last page says so.
	p, err := s.SessionsPage(ctx, "", 1<<20)
	if err != nil || p.Next != "" {
		t.Fatalf("a page holding everything: next %q, %v", p.Next, err)
	}
}

// TestSessionsPageCursorSurvivesRemoval: a cursor pointing at a session
// that was removed since still continues the listing.
func TestSessionsPageCursorSurvivesRemoval(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	t0 := time.Unix(1700000000, 0).UTC()
	for i := range 5 {
		if err := s.Apply(ctx, CreateSession{Session: Session{ID: fmt.Sprintf("sess_%d", i), CreatedAt: t0.Add(time.Duration(i) * time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.SessionsPage(ctx, "", 2)
	if err != nil || len(p.Sessions) != 2 || p.Sessions[0].ID != "sess_4" || p.Next == "" {
		t.Fatalf("first page %+v, %v", p, err)
	}
	if _, err := s.Prune(ctx, t0.Add(10*time.Hour)); err != nil { // removes every session: none has an event
		t.Fatal(err)
	}
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_2", CreatedAt: t0.Add(2 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	p, err = s.SessionsPage(ctx, p.Next, 2)
	if err != nil || len(p.Sessions) != 1 || p.Sessions[0].ID != "sess_2" || p.Next != "" {
		t.Fatalf("page after a removal %+v, %v", p, err)
	}
	for _, bad := range []string{"x", ":sess", "12:", "-1:sess", "1e9:sess", "99999999999999999999:sess", " 1:sess"} {
		if _, err := s.SessionsPage(ctx, bad, 2); !errors.Is(err, ErrBadCursor) {
			t.Errorf("cursor %q: %v, want ErrBadCursor", bad, err)
		}
	}
}

// FuzzParseSessionCursor: the cursor decoder never panics, accepts only
// what it documents, and reads back every cursor the store issues.
func FuzzParseSessionCursor(f *testing.F) {
	for _, seed := range []string{"", ":", "1:sess_a", "1700000000000000000:sess_01J0000000000000000000000A", "-5:x",
		"9223372036854775807:s", "9223372036854775808:s", "1:" + string(make([]byte, 200)), "12:a:b", "٣:x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, c string) {
		at, id, err := ParseSessionCursor(c)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("%q: %v does not wrap ErrBadCursor", c, err)
			}
			return
		}
		if at < 0 || id == "" || len(id) > maxCursorID {
			t.Fatalf("%q accepted as %d, %q", c, at, id)
		}
		again := sessionCursor(Session{ID: id, CreatedAt: fromNanos(at)})
		if at2, id2, err := ParseSessionCursor(again); err != nil || id2 != id || (at2 != at && at != 0) {
			t.Fatalf("%q → %d %q → %q → %d %q %v", c, at, id, again, at2, id2, err)
		}
	})
}
