package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/servertest"
)

type messagePage struct {
	Messages []message.Message `json:"messages"`
	HasMore  *bool             `json:"has_more"`
}

func fetchPage(t *testing.T, h *servertest.Harness, sid, query string) messagePage {
	t.Helper()
	r := get(t, h, "/sessions/"+sid+"/messages"+query)
	if r.status != http.StatusOK {
		t.Fatalf("messages%s: %d %s", query, r.status, r.body)
	}
	var p messagePage
	r.decode(t, &p)
	if p.HasMore == nil || p.Messages == nil {
		t.Fatalf("messages%s: page lacks messages or has_more: %s", query, r.body)
	}
	return p
}

func ids(ms []message.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// TestMessagePagination walks a conversation backwards with before= and
// several page sizes: every message appears exactly once, each page is
// oldest first, has_more is false only on the last page, and the pages
// put together are the whole conversation.
func TestMessagePagination(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	const turns = 7
	for i := range turns {
		h.Submit(sid, "/echo "+strconv.Itoa(i))
		h.WaitTurn(sid)
	}

	all := fetchPage(t, h, sid, "?limit=500")
	if *all.HasMore {
		t.Fatal("has_more on a page holding everything")
	}
	if len(all.Messages) != 2*turns {
		t.Fatalf("%d messages, want %d", len(all.Messages), 2*turns)
	}
	// The conversation in order: user "/echo i", assistant "i".
	for i, m := range all.Messages {
		n := strconv.Itoa(i / 2)
		want := message.RoleUser
		text := "/echo " + n
		if i%2 == 1 {
			want, text = message.RoleAssistant, n
		}
		if m.Role != want || m.PlainText() != text || m.SessionID != "" && m.SessionID != sid {
			t.Fatalf("message %d: %s %q, want %s %q", i, m.Role, m.PlainText(), want, text)
		}
		if m.ID == "" || m.Status != message.StatusComplete {
			t.Fatalf("message %d: id %q status %q", i, m.ID, m.Status)
		}
	}
	if def := fetchPage(t, h, sid, ""); !slices.Equal(ids(def.Messages), ids(all.Messages)) || *def.HasMore {
		t.Fatalf("default page differs from the full list")
	}

	for _, k := range []int{1, 2, 3, 5, 7, 13, 14, 15, 50, 500} {
		t.Run(fmt.Sprintf("limit=%d", k), func(t *testing.T) {
			var pages [][]message.Message
			seen := map[string]bool{}
			before := ""
			for {
				q := "?limit=" + strconv.Itoa(k)
				if before != "" {
					q += "&before=" + before
				}
				p := fetchPage(t, h, sid, q)
				if len(p.Messages) == 0 || len(p.Messages) > k {
					t.Fatalf("page %d: %d messages with limit %d", len(pages), len(p.Messages), k)
				}
				for i, m := range p.Messages {
					if seen[m.ID] {
						t.Fatalf("message %s on two pages", m.ID)
					}
					seen[m.ID] = true
					if i > 0 && indexOf(all.Messages, m.ID) != indexOf(all.Messages, p.Messages[i-1].ID)+1 {
						t.Fatalf("page %d is not oldest first and contiguous: %v", len(pages), ids(p.Messages))
					}
				}
				if before != "" && indexOf(all.Messages, p.Messages[len(p.Messages)-1].ID)+1 != indexOf(all.Messages, before) {
					t.Fatalf("page before %s does not end right before it: %v", before, ids(p.Messages))
				}
				pages = append(pages, p.Messages)
				// has_more is exactly "older messages exist".
				if oldest := indexOf(all.Messages, p.Messages[0].ID); *p.HasMore != (oldest > 0) {
					t.Fatalf("page %d starts at %d with has_more %v", len(pages)-1, oldest, *p.HasMore)
				}
				if !*p.HasMore {
					break
				}
				if len(p.Messages) != k {
					t.Fatalf("a page other than the last has %d messages, limit %d", len(p.Messages), k)
				}
				before = p.Messages[0].ID
				if len(pages) > len(all.Messages) {
					t.Fatal("pagination does not end")
				}
			}
			if want := (len(all.Messages) + k - 1) / k; len(pages) != want {
				t.Errorf("%d pages, want %d", len(pages), want)
			}
			var joined []message.Message
			for i := len(pages) - 1; i >= 0; i-- {
				joined = append(joined, pages[i]...)
			}
			if !slices.Equal(ids(joined), ids(all.Messages)) {
				t.Fatalf("pages put together\n got %v\nwant %v", ids(joined), ids(all.Messages))
			}
		})
	}

	// Before the oldest message there is nothing.
	p := fetchPage(t, h, sid, "?before="+all.Messages[0].ID)
	if len(p.Messages) != 0 || *p.HasMore {
		t.Fatalf("before the oldest: %v, has_more %v", ids(p.Messages), *p.HasMore)
	}
	// Before the newest: everything else.
	p = fetchPage(t, h, sid, "?limit=500&before="+all.Messages[len(all.Messages)-1].ID)
	if !slices.Equal(ids(p.Messages), ids(all.Messages[:len(all.Messages)-1])) || *p.HasMore {
		t.Fatalf("before the newest: %v", ids(p.Messages))
	}
}

// TestMessagesDefaultLimit: without limit a page holds 50 messages, the
// newest ones.
func TestMessagesDefaultLimit(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	const turns = 26 // 52 messages
	for i := range turns {
		h.Submit(sid, "/echo "+strconv.Itoa(i))
		h.WaitTurn(sid)
	}
	all := fetchPage(t, h, sid, "?limit=500")
	if len(all.Messages) != 2*turns {
		t.Fatalf("%d messages", len(all.Messages))
	}
	p := fetchPage(t, h, sid, "")
	if !*p.HasMore || !slices.Equal(ids(p.Messages), ids(all.Messages[2:])) {
		t.Fatalf("default page: %d messages, has_more %v", len(p.Messages), *p.HasMore)
	}
	p = fetchPage(t, h, sid, "?before="+p.Messages[0].ID)
	if *p.HasMore || !slices.Equal(ids(p.Messages), ids(all.Messages[:2])) {
		t.Fatalf("second default page: %v, has_more %v", ids(p.Messages), *p.HasMore)
	}
}

func indexOf(ms []message.Message, id string) int {
	for i, m := range ms {
		if m.ID == id {
			return i
		}
	}
	return -1
}
