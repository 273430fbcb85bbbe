package hub

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/event"
)

// TestWindowSetModel drives the replay windows directly against a
// model of what the store holds (every event added, less what retention
// deleted), through random appends over several sessions, views,
// invalidations and prunes, with a cap small enough to evict often:
//
//   - every window is exactly the store's events of its session after
//     its floor (nothing missing, nothing extra, in order);
//   - no window holds more than its per-session bound, and every window
//     together at most the cap;
//   - a window let go for the cap was less recently used (appended to
//     or viewed) than every window that stayed, the one appended to
//     excepted;
//   - the byte count is the sum of what is held;
//   - every held item is a copy of the item added, its frame byte for
//     byte;
//   - a slice a view returned never changes afterwards, ids and frames
//     (replays read it without the lock).
func TestWindowSetModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		perSession := rapid.IntRange(1, 30).Draw(rt, "perSession")
		capBytes := int64(rapid.IntRange(windowOverhead+200, 8000).Draw(rt, "cap"))
		ws := newWindowSet(perSession, capBytes, nil)
		seq, err := event.NewSequencer("", nil)
		if err != nil {
			rt.Fatal(err)
		}
		sessions := []string{"sess_a", "sess_b", "sess_c", "sess_d"}
		store := map[string][]*Item{} // what the store holds, per session
		used := map[string]int{}      // session → last use (model of the LRU order)
		clock := 0
		base := time.Unix(1_700_000_000, 0)
		var views []seenView
		for step := range rapid.IntRange(1, 120).Draw(rt, "steps") {
			sid := rapid.SampledFrom(sessions).Draw(rt, fmt.Sprintf("sid%d", step))
			switch op := rapid.IntRange(0, 9).Draw(rt, fmt.Sprintf("op%d", step)); {
			case op <= 5: // append
				id, _ := seq.Next()
				// Emission times mostly follow ids, not always.
				ts := base.Add(time.Duration(step*10+rapid.IntRange(-15, 15).Draw(rt, fmt.Sprintf("jitter%d", step))) * time.Second)
				it := &Item{ID: id, SessionID: sid, Type: event.ToolCalled, TS: ts,
					Frame: []byte(strings.Repeat("x", rapid.IntRange(1, 900).Draw(rt, fmt.Sprintf("size%d", step))))}
				before := present(ws)
				ws.add(it)
				store[sid] = append(store[sid], it)
				clock++
				used[sid] = clock
				checkEvictions(rt, ws, before, sid, used)
			case op <= 7: // view
				_, items, ok := ws.view(sid, "", "evt_~")
				if ok {
					clock++
					used[sid] = clock
					views = append(views, seeView(items))
				}
			case op == 8:
				ws.invalidate(sid)
			default: // retention
				before := base.Add(time.Duration(rapid.IntRange(0, step*10).Draw(rt, fmt.Sprintf("cutoff%d", step))) * time.Second)
				ws.prune(before)
				for s, evs := range store {
					store[s] = slices.DeleteFunc(evs, func(it *Item) bool { return it.TS.Before(before) })
				}
			}
			checkWindows(rt, ws, store, perSession, capBytes)
		}
		for i, v := range views {
			if err := v.check(); err != nil {
				rt.Fatalf("view %d changed under its reader: %v", i, err)
			}
		}
	})
}

// seenView is a view's slice and what it held when it was taken.
type seenView struct {
	items  []Item
	ids    []string
	frames []string
}

func seeView(items []Item) seenView {
	v := seenView{items: items, ids: itemIDs(items)}
	for i := range items {
		v.frames = append(v.frames, string(items[i].Frame))
	}
	return v
}

// check reports how the view's slice changed since it was taken.
func (v seenView) check() error {
	if got := itemIDs(v.items); !slices.Equal(got, v.ids) {
		return fmt.Errorf("ids %v, were %v", got, v.ids)
	}
	for i := range v.items {
		if string(v.items[i].Frame) != v.frames[i] {
			return fmt.Errorf("frame of %s changed", v.ids[i])
		}
	}
	return nil
}

func itemIDs(items []Item) []string {
	out := make([]string, len(items))
	for i := range items {
		out[i] = items[i].ID
	}
	return out
}

// present lists the sessions that have a window.
func present(ws *windowSet) map[string]bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := map[string]bool{}
	for sid := range ws.byID {
		out[sid] = true
	}
	return out
}

// checkEvictions: the windows an append to cur let go were used less
// recently than every other window that stayed.
func checkEvictions(t *rapid.T, ws *windowSet, before map[string]bool, cur string, used map[string]int) {
	after := present(ws)
	newestGone, oldestKept := -1, int(^uint(0)>>1)
	for sid := range before {
		if sid == cur {
			continue
		}
		if after[sid] {
			oldestKept = min(oldestKept, used[sid])
		} else {
			newestGone = max(newestGone, used[sid])
		}
	}
	if newestGone > oldestKept {
		t.Fatalf("evicted a window used at %d while one used at %d stayed", newestGone, oldestKept)
	}
}

func checkWindows(t *rapid.T, ws *windowSet, store map[string][]*Item, perSession int, capBytes int64) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var total int64
	for sid, w := range ws.byID {
		var want []string
		var frames []string
		for _, it := range store[sid] {
			if it.ID > w.floor {
				want = append(want, it.ID)
				frames = append(frames, string(it.Frame))
			}
		}
		if got := itemIDs(w.held()); !slices.Equal(got, want) {
			t.Fatalf("window of %s (floor %s) holds %v, the store after its floor %v", sid, w.floor, got, want)
		}
		for i, held := 0, w.held(); i < len(held); i++ {
			if string(held[i].Frame) != frames[i] {
				t.Fatalf("window of %s holds %s with another frame than the store's", sid, held[i].ID)
			}
		}
		if len(w.held()) > perSession {
			t.Fatalf("window of %s holds %d, bound %d", sid, len(w.held()), perSession)
		}
		b := int64(windowOverhead)
		held := w.held()
		for i := range held {
			b += cost(&held[i])
		}
		if b != w.bytes {
			t.Fatalf("window of %s counts %d bytes, holds %d", sid, w.bytes, b)
		}
		total += b
	}
	if total != ws.bytes {
		t.Fatalf("windows count %d bytes, hold %d", ws.bytes, total)
	}
	if ws.bytes > capBytes {
		t.Fatalf("windows hold %d bytes, cap %d", ws.bytes, capBytes)
	}
	n := 0
	for w := ws.lru.next; w != &ws.lru; w = w.next {
		n++
	}
	if n != len(ws.byID) {
		t.Fatalf("use order lists %d windows, the map %d", n, len(ws.byID))
	}
}

// TestWindowViewBounds: a view holds what is after max(since, floor)
// and at or before the seam, and a cursor at the floor (the last event
// the window let go) is inside it.
func TestWindowViewBounds(t *testing.T) {
	ws := newWindowSet(3, 1<<20, nil)
	seq, _ := event.NewSequencer("", nil)
	var ids []string
	for range 5 {
		id, ts := seq.Next()
		ids = append(ids, id)
		ws.add(&Item{ID: id, SessionID: "s", TS: ts, Frame: []byte("{}")})
	}
	floor, items, ok := ws.view("s", ids[1], ids[3])
	if !ok || floor != ids[1] || !slices.Equal(itemIDs(items), ids[2:4]) {
		t.Fatalf("view (%s, %s]: floor %s items %v ok %v; want floor %s items %v", ids[1], ids[3], floor, itemIDs(items), ok, ids[1], ids[2:4])
	}
	if _, items, _ := ws.view("s", ids[0], ids[4]); !slices.Equal(itemIDs(items), ids[2:]) {
		t.Fatalf("a cursor before the floor: items %v, want those after the floor %v", itemIDs(items), ids[2:])
	}
	if _, items, _ := ws.view("s", ids[4], ids[4]); len(items) != 0 {
		t.Fatalf("a cursor at the seam: items %v", itemIDs(items))
	}
	// A new window's floor is just below its first event: a cursor at
	// the event before it (of any session) is inside.
	ws2 := newWindowSet(10, 1<<20, nil)
	prev, _ := seq.Next()
	first, ts := seq.Next()
	ws2.add(&Item{ID: first, SessionID: "t", TS: ts, Frame: []byte("{}")})
	floor, items, _ = ws2.view("t", prev, first)
	if floor >= first || prev > floor || !slices.Equal(itemIDs(items), []string{first}) {
		t.Fatalf("new window: floor %s (first %s, the id before %s), items %v", floor, first, prev, itemIDs(items))
	}
}

// TestWindowOutOfOrderStartsAgain: an event at or before what a window
// already covers (never expected from delivery) does not make a window
// that skips or repeats events: the window starts again from it.
func TestWindowOutOfOrderStartsAgain(t *testing.T) {
	ws := newWindowSet(10, 1<<20, nil)
	seq, _ := event.NewSequencer("", nil)
	a, _ := seq.Next()
	b, _ := seq.Next()
	ws.add(&Item{ID: b, SessionID: "s", Frame: []byte("{}")})
	ws.add(&Item{ID: a, SessionID: "s", Frame: []byte("{}")})
	floor, items, _ := ws.view("s", "", b)
	if !slices.Equal(itemIDs(items), []string{a}) || floor >= a {
		t.Fatalf("after an out-of-order event: floor %s items %v", floor, itemIDs(items))
	}
}

// TestWindowViewSurvivesTrims: a view taken while a window is appended
// to and trimmed from the front, many times over (the held slice is
// copied anew as it slides), still holds what it held.
func TestWindowViewSurvivesTrims(t *testing.T) {
	ws := newWindowSet(50, 1<<20, nil)
	seq, _ := event.NewSequencer("", nil)
	var views []seenView
	for i := range 2000 {
		id, ts := seq.Next()
		ws.add(&Item{ID: id, SessionID: "s", TS: ts, Frame: fmt.Appendf(nil, `{"n":%d,"pad":%q}`, i, strings.Repeat("p", i%700))})
		if i%7 == 0 {
			_, items, _ := ws.view("s", "", id)
			views = append(views, seeView(items))
		}
	}
	for i, v := range views {
		if err := v.check(); err != nil {
			t.Fatalf("view %d changed: %v", i, err)
		}
	}
}
