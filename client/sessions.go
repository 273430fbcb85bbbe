package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/metis-agent/metis/protocol"
)

// SessionPage is one page of GET /sessions: sessions newest first, and
// the cursor of the next (older) page when HasMore.
type SessionPage = protocol.SessionList

// SessionsPage fetches one page of the session listing: up to limit
// sessions (0: the server's default page) after the cursor before (""
// for the newest).
func (c *Client) SessionsPage(ctx context.Context, before string, limit int) (SessionPage, error) {
	q := url.Values{}
	if before != "" {
		q.Set("before", before)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/sessions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p SessionPage
	err := c.do(ctx, http.MethodGet, path, nil, &p)
	return p, err
}

// EachSessionPage walks the whole listing, newest first, calling fn
// with each page in turn until the last page or fn's first error.
func (c *Client) EachSessionPage(ctx context.Context, limit int, fn func([]Session) error) error {
	before := ""
	for {
		p, err := c.SessionsPage(ctx, before, limit)
		if err != nil {
			return err
		}
		if err := fn(p.Sessions); err != nil {
			return err
		}
		if !p.HasMore {
			return nil
		}
		if p.Next == "" || p.Next == before {
			return fmt.Errorf("metis: session listing: the server's next cursor %q does not advance", p.Next)
		}
		before = p.Next
	}
}

// Sessions lists every session, workers included, newest first, walking
// every page.
func (c *Client) Sessions(ctx context.Context) ([]Session, error) {
	var all []Session
	err := c.EachSessionPage(ctx, 0, func(ss []Session) error {
		all = append(all, ss...)
		return nil
	})
	return all, err
}
