package acp

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// proxy is a TCP proxy in front of a server whose connections a test
// can cut, and refuse for a while.
type proxy struct {
	URL     string
	ln      net.Listener
	backend string
	mu      sync.Mutex
	blocked bool
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

func newProxy(t *testing.T, backendURL string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{URL: "http://" + ln.Addr().String(), ln: ln, backend: strings.TrimPrefix(backendURL, "http://"), conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.blocked {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[b] = true, true
		p.wg.Add(2)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(b, c)
		go pipe(c, b)
	}
}

// cut closes every open connection.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *proxy) block(b bool) {
	p.mu.Lock()
	p.blocked = b
	p.mu.Unlock()
}

// The connection to the server drops mid-answer for longer than the
// server's ring of streaming events covers: the agent resyncs, holds the
// cut message back and completes it from its final content, so the
// editor's text is still exactly the stored answer. Without the gap
// handling, the deltas streamed during the outage would be missing.
func TestDroppedConnectionWithGap(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "", func(c *config.Config) { c.DemoDelay = 5 * time.Millisecond; c.StreamRing = 16 })
	p := newProxy(t, h.URL)
	s := serveAgent(t, p.URL)
	s.initialize(t)
	sid := s.newSession(t, h.Workspace)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := s.promptAsync(ctx, sid, "/long 300")
	s.ed.waitFor(t, "some chunks", func(us []sdk.SessionUpdate) bool {
		return count(us, func(u sdk.SessionUpdate) bool { return u.AgentMessageChunk != nil }) >= 10
	})
	p.block(true)
	p.cut()
	deltas := func() int {
		n := 0
		for _, ev := range h.Live.Events(sid) {
			if ev.Type == "text.delta" {
				n++
			}
		}
		return n
	}
	// Let the server stream well past its ring while the agent is away.
	base := deltas()
	deadline := time.After(testTimeout)
	for deltas() < base+100 {
		select {
		case <-deadline:
			t.Fatal("the turn did not go on streaming")
		case <-time.After(10 * time.Millisecond):
		}
	}
	p.block(false)
	a := <-done
	if a.err != nil || a.r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt answered %+v, %v", a.r, a.err)
	}
	got, want := agentText(s.ed.all()), storedText(t, h.URL, sid)
	if got != want {
		t.Errorf("editor text (%d bytes) differs from the stored answer (%d bytes)\n got %q\nwant %q", len(got), len(want), clip(got, 300), clip(want, 300))
	}
}
