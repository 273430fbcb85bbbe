package api_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/servertest"
)

// listPage is GET /sessions's answer.
type listPage struct {
	Sessions []struct {
		ID string `json:"id"`
	} `json:"sessions"`
	HasMore *bool  `json:"has_more"`
	Next    string `json:"next"`
}

// TestListSessionsPaginated: GET /sessions pages newest first with
// ?limit= and ?before=<next>; walking it yields every session once;
// has_more is false and next absent on the last page; a bad limit or
// cursor is a 400 invalid_request.
func TestListSessionsPaginated(t *testing.T) {
	h := servertest.Start(t, "")
	var created []string
	for range 7 {
		created = append(created, h.CreateSession())
	}
	slices.Reverse(created) // newest first

	var walked []string
	before := ""
	for pages := 1; ; pages++ {
		q := url.Values{"limit": {"3"}}
		if before != "" {
			q.Set("before", before)
		}
		r := get(t, h, "/sessions?"+q.Encode())
		if r.status != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, r.status, r.body)
		}
		var p listPage
		r.decode(t, &p)
		if p.HasMore == nil {
			t.Fatalf("page %d without has_more: %s", pages, r.body)
		}
		for _, s := range p.Sessions {
			walked = append(walked, s.ID)
		}
		if !*p.HasMore {
			if p.Next != "" || pages != 3 || len(p.Sessions) != 1 {
				t.Fatalf("last page %d: %s", pages, r.body)
			}
			break
		}
		if len(p.Sessions) != 3 || p.Next == "" {
			t.Fatalf("page %d: %s", pages, r.body)
		}
		before = p.Next
	}
	if !slices.Equal(walked, created) {
		t.Fatalf("walked %v, want %v", walked, created)
	}

	// The default page holds them all here, newest first.
	var all listPage
	get(t, h, "/sessions").decode(t, &all)
	if len(all.Sessions) != 7 || all.Sessions[0].ID != created[0] || *all.HasMore {
		t.Fatalf("default page: %+v", all)
	}

	for _, bad := range []string{"limit=0", "limit=-1", "limit=1001", "limit=x", "before=nope", "before=1:", "before=-1:sess_x", "limit=2&before=%00"} {
		r := get(t, h, "/sessions?"+bad)
		if r.status != http.StatusBadRequest || r.errCode(t) != "invalid_request" {
			t.Errorf("?%s: %d %s, want 400 invalid_request", bad, r.status, r.body)
		}
	}
}
