package client_test

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

func TestMain(m *testing.M) {
	// Each check runs real turns through a server: keep the default run
	// short; -rapid.checks=N asks for more.
	flag.Parse()
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = flag.Set("rapid.checks", "12")
	}
	goleak.VerifyTestMain(m)
}

// proxy forwards TCP to target and can cut every connection at once.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	return p
}

func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(s, c); s.Close() }()
		go func() { defer p.wg.Done(); io.Copy(c, s); c.Close() }()
	}
}

// cut closes every open connection.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

// shape is the part of a view two clients must agree on.
type shape struct {
	Messages []msgShape
	Tools    map[string]string
	Turn     client.Turn
}

type msgShape struct {
	ID, Role, Status string
	Blocks           []string
}

func shapeOf(v *client.View) shape {
	s := shape{Tools: map[string]string{}, Turn: v.Turn}
	for _, m := range v.Messages {
		ms := msgShape{ID: m.ID, Role: m.Role, Status: m.Status}
		for _, b := range m.Blocks {
			in, _ := json.Marshal(json.RawMessage(b.Input))
			if len(b.Input) == 0 {
				in = nil
			}
			ms.Blocks = append(ms.Blocks, b.Type+"|"+b.Text+"|"+b.Thinking+"|"+b.ID+"|"+b.Name+"|"+string(in)+"|"+b.ToolUseID+"|"+b.Content)
		}
		s.Messages = append(s.Messages, ms)
	}
	for id, tc := range v.Tools {
		s.Tools[id] = tc.Status
	}
	return s
}

// follow runs Follow until the given number of turns have ended and
// returns the final view.
func follow(ctx context.Context, c *client.Client, sid string, turns int, onUpdate func(client.Update)) (*client.View, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var final *client.View
	ended := map[string]bool{}
	err := c.Follow(ctx, sid, client.FollowOptions{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		OnUpdate: func(u client.Update) {
			if onUpdate != nil {
				onUpdate(u)
			}
			if u.Kind == client.EventApplied && u.Event.Type == "turn.completed" {
				ended[*u.Event.TurnID] = true
				if len(ended) == turns {
					final = u.View.Clone()
					stop()
				}
			}
		}})
	if final != nil {
		return final, nil
	}
	return nil, err
}

// TestReconnectPropertyViewMatches: whatever the disconnect points, a
// client behind a flaky link ends with the same materialized view as one
// that never disconnected.
func TestReconnectPropertyViewMatches(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.DemoDelay = time.Millisecond })
	var reconnects atomic.Int64
	defer func() {
		if reconnects.Load() == 0 {
			t.Error("no check ever reconnected: the property was not exercised")
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		cuts := rapid.SliceOfN(rapid.IntRange(1, 120), 1, 5).Draw(rt, "cut_after_ms")
		sid := h.CreateSession()
		p := newProxy(t, h.URL[len("http://"):])
		defer p.close()

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		var ref, flaky *client.View
		var refErr, flakyErr error
		subscribed := make(chan struct{}, 2)
		onSub := func(u client.Update) {
			if u.Kind == client.Subscribed && !u.Resumed {
				subscribed <- struct{}{}
			}
		}
		wg.Add(2)
		go func() { defer wg.Done(); ref, refErr = follow(ctx, client.New(h.URL), sid, 2, onSub) }()
		go func() {
			defer wg.Done()
			flaky, flakyErr = follow(ctx, client.New(p.URL()), sid, 2, func(u client.Update) {
				if u.Kind == client.Reconnecting {
					reconnects.Add(1)
				}
				onSub(u)
			})
		}()
		<-subscribed
		<-subscribed
		go func() {
			for _, ms := range cuts {
				select {
				case <-time.After(time.Duration(ms) * time.Millisecond):
					p.cut()
				case <-ctx.Done():
					return
				}
			}
		}()
		h.Submit(sid, "/long 60")
		h.WaitTurn(sid)
		h.Submit(sid, "what is in the workspace?")
		wg.Wait()
		if refErr != nil || flakyErr != nil {
			rt.Fatalf("follow: ref %v, flaky %v", refErr, flakyErr)
		}
		a, b := shapeOf(ref), shapeOf(flaky)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			rt.Fatalf("views differ after cuts %v:\nref   %s\nflaky %s", cuts, ja, jb)
		}
		if flaky.Mismatches != 0 {
			rt.Fatalf("%d messages' deltas disagreed with message.complete after reconnects", flaky.Mismatches)
		}
	})
}

// TestFollowReconnectsAfterAStorageFailure: a storage-failure resync
// closes the stream with 1008 storage_failure; Follow reconnects with
// its cursor, resumes, and sees what came after.
func TestFollowReconnectsAfterAStorageFailure(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	updates := make(chan client.Update, 64)
	done := make(chan error, 1)
	go func() {
		done <- client.New(h.URL).Follow(ctx, sid, client.FollowOptions{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
			OnUpdate: func(u client.Update) {
				select {
				case updates <- client.Update{Kind: u.Kind, Err: u.Err, Resumed: u.Resumed}:
				case <-ctx.Done():
				}
			}})
	}()
	next := func(kind client.UpdateKind) client.Update {
		t.Helper()
		for {
			select {
			case u := <-updates:
				if u.Kind == kind {
					return u
				}
			case <-ctx.Done():
				t.Fatalf("no update of kind %v", kind)
			}
		}
	}
	next(client.Subscribed)
	h.Server.Hub.Resync(sid)
	if u := next(client.Reconnecting); u.Err == nil || !strings.Contains(u.Err.Error(), protocol.ReasonStorageFailure.Code) {
		t.Fatalf("reconnecting because of %v, want the storage_failure close", u.Err)
	}
	if u := next(client.Subscribed); !u.Resumed {
		t.Fatalf("after the storage failure: %+v, want a resumed subscription", u)
	}
	cancel()
	<-done
}
