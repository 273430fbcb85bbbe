package event

import (
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"pgregory.net/rapid"
)

// TestSequencerMonotonicUnderClockSteps drives a sequencer with a clock
// that jumps forward and back and checks every id is larger than the
// last, as a string.
func TestSequencerMonotonicUnderClockSteps(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := time.Date(2026, 5, 8, 12, 0, 0, 0, time.UTC)
		steps := rapid.SliceOfN(rapid.IntRange(-5000, 5000), 1, 300).Draw(t, "steps")
		now := base
		i := 0
		s, err := NewSequencer("", func() time.Time {
			now = now.Add(time.Duration(steps[i%len(steps)]) * time.Millisecond)
			i++
			return now
		})
		if err != nil {
			t.Fatal(err)
		}
		prev := ""
		for range len(steps) * 3 {
			id, _ := s.Next()
			if id <= prev {
				t.Fatalf("id %s not after %s", id, prev)
			}
			if _, err := ParseID(id); err != nil {
				t.Fatal(err)
			}
			prev = id
		}
	})
}

// TestSequencerConcurrentEmitters checks ids stay unique and strictly
// increasing in the order callers obtained them, with many goroutines.
func TestSequencerConcurrentEmitters(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		workers := rapid.IntRange(2, 8).Draw(t, "workers")
		per := rapid.IntRange(1, 200).Draw(t, "per")
		s, _ := NewSequencer("", nil)
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range per {
					mu.Lock() // record in the order ids are handed out
					id, _ := s.Next()
					order = append(order, id)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for i := 1; i < len(order); i++ {
			if order[i] <= order[i-1] {
				t.Fatalf("id %d %s not after %s", i, order[i], order[i-1])
			}
		}
	})
}

func TestSequencerSeededAfterLast(t *testing.T) {
	future := time.Now().Add(time.Hour)
	var u ulid.ULID
	_ = u.SetTime(ulid.Timestamp(future))
	last := IDPrefix + u.String()
	s, err := NewSequencer(last, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := s.Next()
	if id <= last {
		t.Fatalf("first id %s not after seeded %s", id, last)
	}
	if _, err := NewSequencer("bogus", nil); err == nil {
		t.Fatal("bad seed accepted")
	}
}

func TestSequencerEntropyOverflowAdvancesMillisecond(t *testing.T) {
	fixed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var u ulid.ULID
	_ = u.SetTime(ulid.Timestamp(fixed))
	max := [10]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	_ = u.SetEntropy(max[:])
	s, _ := NewSequencer(IDPrefix+u.String(), func() time.Time { return fixed })
	id, _ := s.Next()
	got, _ := ParseID(id)
	if got.Time() != u.Time()+1 {
		t.Fatalf("overflow: time %d, want %d", got.Time(), u.Time()+1)
	}
	if id <= IDPrefix+u.String() {
		t.Fatal("not increasing across overflow")
	}
}

// TestSequencerLeaveMillisecondSkipsAnEarlierProcessesIds: a sequencer
// opened from a stored id that leaves its millisecond issues ids above
// every id an earlier sequencer went on to issue in that millisecond
// (streaming ids, never stored), with the clock still in it, and
// further ids keep increasing.
func TestSequencerLeaveMillisecondSkipsAnEarlierProcessesIds(t *testing.T) {
	fixed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return fixed }
	earlier, _ := NewSequencer("", clock)
	stored, _ := earlier.Next()
	var unstored []string
	for range 100 {
		id, _ := earlier.Next()
		unstored = append(unstored, id)
	}
	s, err := NewSequencer(stored, clock)
	if err != nil {
		t.Fatal(err)
	}
	s.LeaveMillisecond()
	prev := ""
	for range 3 {
		id, _ := s.Next()
		if id <= unstored[len(unstored)-1] || id <= prev {
			t.Fatalf("id %s after leaving the millisecond: not above the earlier process's %s and the previous %q", id, unstored[len(unstored)-1], prev)
		}
		prev = id
	}
	fresh, _ := NewSequencer("", clock)
	fresh.LeaveMillisecond() // nothing to leave: ids start at the clock
	id, _ := fresh.Next()
	if u, _ := ParseID(id); u.Time() != ulid.Timestamp(fixed) {
		t.Fatalf("a new sequencer left a millisecond it never had: %d, want %d", u.Time(), ulid.Timestamp(fixed))
	}
}

// TestSequencerPass: a cursor of an earlier process whose clock ran
// ahead (ids this sequencer never issued) is passed: every later id
// sorts after it, in a later millisecond. Once the sequencer has issued
// an id at or before a cursor, Pass refuses it and changes nothing; a
// cursor before everything it issued is passed.
func TestSequencerPass(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ahead, _ := NewSequencer("", func() time.Time { return now.Add(time.Minute) })
	cursor, _ := ahead.Next()

	s, _ := NewSequencer("", clock)
	if ok, err := s.Pass(cursor); !ok || err != nil {
		t.Fatalf("Pass(%s) before any id: %v %v", cursor, ok, err)
	}
	first, _ := s.Next()
	if first <= cursor {
		t.Fatalf("id %s after passing %s", first, cursor)
	}
	if u, _ := ParseID(first); u.Time() != ulid.Timestamp(now.Add(time.Minute))+1 {
		t.Fatalf("first id in millisecond %d, want the one after the cursor's", u.Time())
	}
	if ok, _ := s.Pass(first); ok {
		t.Fatal("Pass of an id the sequencer issued itself")
	}

	behind, _ := NewSequencer("", clock)
	issued, _ := behind.Next()
	if ok, _ := behind.Pass(cursor); ok {
		t.Fatalf("Pass(%s) after issuing %s, before it", cursor, issued)
	}
	if next, _ := behind.Next(); next <= issued || next >= cursor {
		t.Fatalf("a refused Pass changed the ids: %s after %s (cursor %s)", next, issued, cursor)
	}
	early, _ := NewSequencer("", func() time.Time { return now.Add(-time.Hour) })
	old, _ := early.Next()
	if ok, _ := behind.Pass(old); !ok {
		t.Fatalf("Pass(%s), before everything issued: refused", old)
	}
	if _, err := behind.Pass("evt_nonsense"); err == nil {
		t.Fatal("Pass of a malformed id: no error")
	}
}
