package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLinkImagesGivesASessionTheRightToStoredImages: LinkImages lets a
// session serve images another session stored (a fork's copies of its
// source's messages), without their bytes; an image not stored is
// skipped, and linking twice changes nothing.
func TestLinkImagesGivesASessionTheRightToStoredImages(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	t0 := time.Unix(1700000000, 0).UTC()
	im := Image{SHA256: "aa11", MediaType: "image/png", Size: 3, Width: 1, Height: 1, Data: []byte{1, 2, 3}}
	if err := s.Apply(ctx, CreateSession{Session: Session{ID: "sess_src", CreatedAt: t0}},
		CreateSession{Session: Session{ID: "sess_fork", CreatedAt: t0}},
		PutImages{SessionID: "sess_src", Images: []Image{im}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionImage(ctx, "sess_fork", im.SHA256); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before the link: %v, want ErrNotFound", err)
	}
	link := LinkImages{SessionID: "sess_fork", SHA256s: []string{im.SHA256, "bb22"}}
	for range 2 {
		if err := s.Apply(ctx, link); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.SessionImage(ctx, "sess_fork", im.SHA256)
	if err != nil || string(got.Data) != string(im.Data) || got.MediaType != im.MediaType {
		t.Fatalf("linked image = %+v, %v", got, err)
	}
	if _, err := s.SessionImage(ctx, "sess_fork", "bb22"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an image never stored: %v, want ErrNotFound", err)
	}
	if err := s.Apply(ctx, LinkImages{SHA256s: []string{im.SHA256}}); err == nil {
		t.Fatal("a link without a session was applied")
	}
}
