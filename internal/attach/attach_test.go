package attach

import (
	"encoding/base32"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is an injectable, manually advanced clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestRedeemOnce(t *testing.T) {
	r := NewRegistry(0, nil)
	tok := r.Issue("ses_1")
	if !r.Redeem(tok, "ses_1") {
		t.Fatal("first redeem failed")
	}
	if r.Redeem(tok, "ses_1") {
		t.Fatal("second redeem succeeded")
	}
	if r.Redeem(tok, "ses_2") {
		t.Fatal("redeem of a used token for another session succeeded")
	}
}

func TestRedeemOtherSessionConsumes(t *testing.T) {
	r := NewRegistry(0, nil)
	tok := r.Issue("ses_1")
	if r.Redeem(tok, "ses_2") {
		t.Fatal("redeem for another session succeeded")
	}
	if r.Redeem(tok, "ses_1") {
		t.Fatal("token still redeemable after a wrong-session attempt")
	}
	// Session ids are compared exactly.
	tok = r.Issue("ses_1")
	for _, s := range []string{"SES_1", "ses_1 ", "ses_", ""} {
		if r.Redeem(tok, s) {
			t.Fatalf("redeem for %q succeeded", s)
		}
		tok = r.Issue("ses_1")
	}
	if !r.Redeem(tok, "ses_1") {
		t.Fatal("fresh token failed")
	}
}

func TestRedeemUnknown(t *testing.T) {
	r := NewRegistry(0, nil)
	tok := r.Issue("ses_1")
	for _, bad := range []string{"", Prefix, "atk_NOPE", strings.ToLower(tok), tok + "A", tok[:len(tok)-1], strings.TrimPrefix(tok, Prefix)} {
		if r.Redeem(bad, "ses_1") {
			t.Errorf("unknown token %q redeemed", bad)
		}
	}
	// Failed lookups of unknown tokens do not consume real ones.
	if !r.Redeem(tok, "ses_1") {
		t.Fatal("real token failed after unknown-token attempts")
	}
	// Nor does a registry redeem tokens issued by another registry.
	other := NewRegistry(0, nil)
	if r.Redeem(other.Issue("ses_1"), "ses_1") {
		t.Fatal("token from another registry redeemed")
	}
}

func TestExpiry(t *testing.T) {
	c := newClock()
	const ttl = time.Minute
	r := NewRegistry(ttl, c.now)

	early := r.Issue("s")
	edge := r.Issue("s")
	late := r.Issue("s")
	c.advance(ttl - time.Nanosecond)
	if !r.Redeem(early, "s") {
		t.Fatal("token failed just before its TTL")
	}
	c.advance(time.Nanosecond)
	if r.Redeem(edge, "s") {
		t.Fatal("token redeemed at exactly its TTL")
	}
	c.advance(time.Hour)
	if r.Redeem(late, "s") {
		t.Fatal("expired token redeemed")
	}
	// An expired token stays dead even if the clock goes back.
	c.advance(-2 * time.Hour)
	if r.Redeem(late, "s") || r.Redeem(edge, "s") {
		t.Fatal("expired token came back")
	}

	// A token issued later gets its own full TTL.
	fresh := r.Issue("s")
	c.advance(ttl / 2)
	if !r.Redeem(fresh, "s") {
		t.Fatal("fresh token failed")
	}
}

func TestDefaultTTL(t *testing.T) {
	for _, ttl := range []time.Duration{0, -time.Second} {
		c := newClock()
		r := NewRegistry(ttl, c.now)
		a, b := r.Issue("s"), r.Issue("s")
		c.advance(DefaultTTL - time.Nanosecond)
		if !r.Redeem(a, "s") {
			t.Errorf("ttl %v: token failed before DefaultTTL", ttl)
		}
		c.advance(time.Nanosecond)
		if r.Redeem(b, "s") {
			t.Errorf("ttl %v: token redeemed at DefaultTTL", ttl)
		}
	}
}

func TestExpiredTokensAreSwept(t *testing.T) {
	c := newClock()
	r := NewRegistry(time.Minute, c.now)
	for i := 0; i < 100; i++ {
		r.Issue("s")
	}
	c.advance(time.Minute)
	keep := r.Issue("s")
	r.mu.Lock()
	n, o := len(r.tokens), len(r.order)
	r.mu.Unlock()
	if n != 1 || o != 1 {
		t.Fatalf("after expiry and one issue: %d tokens, %d in order; want 1, 1", n, o)
	}
	if !r.Redeem(keep, "s") {
		t.Fatal("new token failed")
	}
}

func TestTokensUniqueAndPrefixed(t *testing.T) {
	r := NewRegistry(0, nil)
	const n = 5000
	seen := make(map[string]bool, n)
	enc := base32.StdEncoding.WithPadding(base32.NoPadding)
	for i := 0; i < n; i++ {
		tok := r.Issue(fmt.Sprint("ses_", i%7))
		if !strings.HasPrefix(tok, Prefix) || Prefix != "atk_" {
			t.Fatalf("token %q lacks prefix atk_", tok)
		}
		body := strings.TrimPrefix(tok, Prefix)
		raw, err := enc.DecodeString(body)
		if err != nil || len(raw) < 16 {
			t.Fatalf("token %q: body is not >=128 bits of base32 (%d bytes, %v)", tok, len(raw), err)
		}
		if strings.ContainsAny(tok, "=/+ \n") {
			t.Fatalf("token %q is not URL/header safe", tok)
		}
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
	}
}

// TestConcurrent issues tokens from several goroutines while several
// others race to redeem each of them; every token must be redeemed
// exactly once. Run under -race.
func TestConcurrent(t *testing.T) {
	r := NewRegistry(0, nil)
	const (
		issuers   = 8
		perIssuer = 250
		redeemers = 8
		n         = issuers * perIssuer
	)
	toks := make([]string, n)
	ready := make([]chan struct{}, n)
	for i := range ready {
		ready[i] = make(chan struct{})
	}
	var wins [n]atomic.Int32

	var wg sync.WaitGroup
	for g := 0; g < issuers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perIssuer; j++ {
				i := g*perIssuer + j
				toks[i] = r.Issue(fmt.Sprint("ses_", i))
				close(ready[i])
			}
		}()
	}
	for g := 0; g < redeemers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each redeemer walks the tokens in a different order.
			for k := 0; k < n; k++ {
				i := (k*7919 + g*(n/redeemers)) % n
				<-ready[i]
				if r.Redeem(toks[i], fmt.Sprint("ses_", i)) {
					wins[i].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for i := range wins {
		if got := wins[i].Load(); got != 1 {
			t.Fatalf("token %d redeemed %d times, want exactly 1", i, got)
		}
	}
	r.mu.Lock()
	left := len(r.tokens)
	r.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d tokens left after all were redeemed", left)
	}
}

func TestOutstandingCapEvictsOldest(t *testing.T) {
	c := newClock()
	r := NewRegistry(time.Hour, c.now)
	toks := make([]string, maxOutstanding)
	for i := range toks {
		toks[i] = r.Issue("s")
	}
	newest := r.Issue("s")
	r.mu.Lock()
	n := len(r.tokens)
	r.mu.Unlock()
	if n != maxOutstanding {
		t.Fatalf("%d tokens outstanding, want the cap %d", n, maxOutstanding)
	}
	if r.Redeem(toks[0], "s") {
		t.Fatal("oldest token survived the cap")
	}
	if !r.Redeem(toks[1], "s") {
		t.Fatal("second-oldest token was evicted too")
	}
	if !r.Redeem(toks[maxOutstanding-1], "s") || !r.Redeem(newest, "s") {
		t.Fatal("recent tokens were evicted")
	}
	// Three outstanding tokens were redeemed, so three more issues fit
	// under the cap without evicting anything...
	r.Issue("s")
	r.Issue("s")
	r.Issue("s")
	r.mu.Lock()
	n = len(r.tokens)
	_, has2 := r.tokens[toks[2]]
	r.mu.Unlock()
	if n != maxOutstanding || !has2 {
		t.Fatalf("after refilling: %d outstanding (want %d), toks[2] present %v", n, maxOutstanding, has2)
	}
	// ...and the next evicts the oldest still outstanding: toks[2]
	// (toks[1] was redeemed).
	r.Issue("s")
	if r.Redeem(toks[2], "s") {
		t.Fatal("toks[2] survived")
	}
	if !r.Redeem(toks[3], "s") {
		t.Fatal("toks[3] evicted early")
	}
}

// TestRedeemedTokensDoNotCountAgainstCap: the cap bounds *unredeemed*
// tokens, so a long-lived outstanding token must not be evicted because
// many other tokens were issued and promptly redeemed after it.
func TestRedeemedTokensDoNotCountAgainstCap(t *testing.T) {
	c := newClock()
	r := NewRegistry(time.Hour, c.now)
	old := r.Issue("ses_old")
	for i := 0; i < 2*maxOutstanding+10; i++ {
		if !r.Redeem(r.Issue("s"), "s") {
			t.Fatalf("redeem %d failed", i)
		}
	}
	if !r.Redeem(old, "ses_old") {
		t.Fatal("the only outstanding token was evicted by redeemed ones")
	}
	r.mu.Lock()
	o := len(r.order)
	r.mu.Unlock()
	if o > 2*maxOutstanding {
		t.Fatalf("order holds %d entries; bookkeeping of redeemed tokens grows unbounded", o)
	}
}
