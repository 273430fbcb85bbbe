package acp

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// A session open in the agent (from session/new, session/load or
// session/resume until session/close or the end of the connection) has
// a standing follower: a subscription to the session's session-level
// events, mapped onto session/update notifications whether a prompt
// runs or not, since another client (the TUI, the dashboard) may rename
// the session or change its mode at any time:
//
//   - session.updated with a title (a rename) → session_info_update;
//   - session.mode_changed → current_mode_update and config_option_update.
//
// The standing follower owns these mappings: a prompt's turn leaves
// them to it, and so do the agent's own mode changes (session/set_mode,
// the mode config option, /mode), whose session.mode_changed comes back
// the same way. One path means nothing is sent twice while a prompt
// runs, and no hand-over between two followers of one stream can lose
// or repeat an event at a turn's edges.
//
// It subscribes through the client package's Follow, live (no snapshot)
// and to these two event types only. The handler that opens the session
// waits for the subscription before reading the state it answers with,
// so no mode change falls between the answer's modes and the updates.
// The answers carry no title, so the follower sends the session's title
// (if it has one) as session_info_update once it is subscribed, before
// the answer; renames count from the subscription on.
// A dropped stream is resumed from the last event id; when the
// server can no longer replay the gap, Follow resubscribes with a
// snapshot and the follower sends the title and the mode the snapshot
// holds where they differ from what it sent last. Like every
// subscription, the server records it only with the bus.* meta-events,
// which do not move the session's last activity.

// sessionEvents are the event types a standing follower subscribes to.
var sessionEvents = []string{string(protocol.EventSessionUpdated), string(protocol.EventSessionModeChanged)}

// followWait bounds how long session/new, session/load and
// session/resume wait for the standing follower's subscription before
// answering; past it the follower goes on subscribing in the background.
const followWait = 5 * time.Second

// watcher is an open session's standing follower.
type watcher struct {
	a    *Agent
	sid  string
	stop context.CancelFunc
	done chan struct{} // closed when the follower has returned

	// Touched by the follower's goroutine only.
	resynced    bool   // the next Subscribed carries a fresh snapshot
	title, mode string // what the editor was sent last ("": nothing yet)
}

// open starts the session's standing follower (unless it runs already)
// and then reads the session: the state session/new, session/load and
// session/resume answer with, as of after the follower subscribed. A
// follower it started is stopped again when the read fails.
func (a *Agent) open(ctx context.Context, sid string) (client.Session, error) {
	started := a.watch(ctx, sid)
	s, err := a.session(ctx, sid)
	if err != nil && started {
		a.unwatch(sid)
	}
	return s, err
}

// watch starts the session's standing follower, one per session, and
// waits (bounded) until it is subscribed. It reports whether it started
// one.
func (a *Agent) watch(ctx context.Context, sid string) bool {
	if a.conn == nil {
		return false
	}
	a.mu.Lock()
	if a.watchers[sid] != nil || a.stopping {
		a.mu.Unlock()
		return false
	}
	wctx, stop := context.WithCancel(a.ctx)
	w := &watcher{a: a, sid: sid, stop: stop, done: make(chan struct{})}
	a.watchers[sid] = w
	a.inflight.Add(1) // wait() waits for it; it ends with the agent's context
	a.mu.Unlock()
	ready := make(chan struct{})
	go func() {
		defer a.inflight.Done()
		defer close(w.done)
		defer a.forget(w)
		defer stop()
		w.run(wctx, ready)
	}()
	t := time.NewTimer(followWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-w.done:
	case <-ctx.Done():
	case <-t.C:
		a.log.Warn("the session's stream is slow to subscribe; renames and mode changes reach the editor once it is", "session", sid)
	}
	return true
}

// unwatch stops the session's standing follower and waits for it to
// return: nothing it maps is sent after.
func (a *Agent) unwatch(sid string) {
	if w := a.dropWatcher(sid, nil); w != nil {
		w.stop()
		<-w.done
	}
}

// forget removes a follower that returned on its own (the session was
// deleted) from the open sessions.
func (a *Agent) forget(w *watcher) { a.dropWatcher(w.sid, w) }

// dropWatcher removes the session's follower from the open sessions and
// returns it; with only set, only when it is that one.
func (a *Agent) dropWatcher(sid string, only *watcher) *watcher {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.watchers[sid]
	if w == nil || only != nil && w != only {
		return nil
	}
	delete(a.watchers, sid)
	return w
}

// run follows the session until ctx ends or the stream cannot go on;
// ready is closed once it is subscribed.
func (w *watcher) run(ctx context.Context, ready chan<- struct{}) {
	var once sync.Once
	err := w.a.c.Follow(ctx, w.sid, client.FollowOptions{
		Filter:     protocol.Filter{EventTypes: sessionEvents},
		NoSnapshot: true,
		OnUpdate: func(u client.Update) {
			switch u.Kind {
			case client.Subscribed:
				once.Do(func() {
					w.sendTitle(ctx)
					close(ready)
				})
				if w.resynced {
					w.resynced = false
					w.catchUp(ctx, u.View)
				}
			case client.Resynced:
				w.resynced = true
			case client.Reconnecting:
				w.a.log.Debug("session stream dropped; reconnecting", "session", w.sid, "attempt", u.Attempt, "err", u.Err)
			case client.EventApplied:
				w.handle(ctx, u.Event)
			}
		},
	})
	if ctx.Err() == nil {
		w.a.log.Warn("renames and mode changes of the session no longer reach the editor", "session", w.sid, "err", err)
	}
}

// handle maps one session-level event of the session.
func (w *watcher) handle(ctx context.Context, ev *protocol.EventEnvelope) {
	if ev.SessionID != w.sid {
		return
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventSessionModeChanged:
		var p protocol.SessionModeChangedPayload
		if decodePayload(ev, &p) == nil {
			w.modeChanged(ctx, p.Mode)
		}
	case protocol.EventSessionUpdated:
		// An archive alone has no ACP counterpart and is not sent.
		var p protocol.SessionEdit
		if decodePayload(ev, &p) == nil && p.Title != nil {
			w.renamed(ctx, *p.Title)
		}
	}
}

// catchUp sends what a fresh snapshot holds that the editor was not
// sent: the events of the gap it replaces are lost.
func (w *watcher) catchUp(ctx context.Context, v *client.View) {
	var sum struct {
		Title string `json:"title"`
	}
	_ = json.Unmarshal(v.Session, &sum)
	if v.Mode != "" && v.Mode != w.mode {
		w.modeChanged(ctx, v.Mode)
	}
	if sum.Title != "" && sum.Title != w.title {
		w.renamed(ctx, sum.Title)
	}
}

// modeChanged sends the session's new mode as current_mode_update, and
// its config options again (they hold the mode too).
func (w *watcher) modeChanged(ctx context.Context, mode string) {
	if !protocol.ValidMode(mode) {
		return
	}
	w.mode = mode
	w.send(ctx, sdk.SessionUpdate{CurrentModeUpdate: &sdk.SessionCurrentModeUpdate{CurrentModeId: sdk.SessionModeId(mode)}})
	s, err := w.a.session(ctx, w.sid)
	if err != nil {
		return
	}
	w.a.sendConfig(ctx, s)
}

// sendTitle sends the title the session has once the follower is
// subscribed, before the session/load or session/resume answer (ACP's
// answers carry no title): a session renamed, or titled by its first
// prompt, before this editor opened it is named in the editor too. A
// new session has none yet. A rename after the subscription arrives as
// its event; renamed drops it if this read saw it already.
func (w *watcher) sendTitle(ctx context.Context) {
	s, err := w.a.session(ctx, w.sid)
	if err != nil {
		return // the handler's own read reports it
	}
	w.renamed(ctx, s.Title)
}

// renamed sends the session's new title as session_info_update, unless
// it is the title the editor was sent last.
func (w *watcher) renamed(ctx context.Context, title string) {
	if title == "" || title == w.title {
		return
	}
	w.title = title
	w.send(ctx, sdk.SessionUpdate{SessionInfoUpdate: &sdk.SessionSessionInfoUpdate{Title: &title}})
}

func (w *watcher) send(ctx context.Context, u sdk.SessionUpdate) {
	if err := w.a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sdk.SessionId(w.sid), Update: u}); err != nil {
		w.a.log.Debug("send a session update", "session", w.sid, "err", err)
	}
}
