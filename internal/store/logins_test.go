package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestLoginsPersist: login sessions are stored by hash, listed, touched
// (never backwards), deleted, and still there after the store is
// reopened.
func TestLoginsPersist(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metis.db")
	s := openTest(t, Options{Path: path})
	t0 := time.Unix(1_700_000_000, 0).UTC()
	a := Login{IDHash: "aa", TokenTag: "tag1", CreatedAt: t0, LastSeenAt: t0}
	b := Login{IDHash: "bb", TokenTag: "tag1", CreatedAt: t0.Add(time.Hour), LastSeenAt: t0.Add(time.Hour)}
	for _, l := range []Login{a, b} {
		if err := s.PutLogin(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	s.TouchLogin("aa", t0.Add(2*time.Hour))
	s.TouchLogin("aa", t0.Add(time.Hour)) // older: ignored
	s.TouchLogin("zz", t0)                // unknown: nothing
	if err := s.DeleteLogins(ctx, "bb", "nope"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Options{Path: path})
	got, err := s.Logins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Login{{IDHash: "aa", TokenTag: "tag1", CreatedAt: t0, LastSeenAt: t0.Add(2 * time.Hour)}}
	if !slices.Equal(got, want) {
		t.Fatalf("logins after reopening: %+v, want %+v", got, want)
	}
	if err := s.PutLogin(ctx, Login{}); err == nil {
		t.Fatal("a login without a hash was stored")
	}
}

// TestMigrateV4Logins: a version 4 database gets the logins table, and
// keeps its rows.
func TestMigrateV4Logins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v4.db")
	ctx := context.Background()
	db, err := sql.Open("sqlite", dsn(path, writerParams))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{schemaV1, schemaV2, schemaV3, schemaV4, "PRAGMA user_version = 4",
		`INSERT INTO sessions (id, created_at) VALUES ('sess_a', 10)`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s := openTest(t, Options{Path: path})
	if l, err := s.Logins(ctx); err != nil || len(l) != 0 {
		t.Fatalf("logins of a migrated database: %v, %v", l, err)
	}
	if err := s.PutLogin(ctx, Login{IDHash: "aa", TokenTag: "t", CreatedAt: time.Now(), LastSeenAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, "sess_a"); err != nil {
		t.Fatalf("the migration lost a session: %v", err)
	}
}
