package event

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// IDPrefix starts every event id.
const IDPrefix = "evt_"

// Sequencer hands out the event ids of one session. Ids strictly increase
// in the order Next is called, whatever the wall clock does: the
// millisecond part never goes below the last id's, and within one
// millisecond the 80-bit entropy is incremented; if it would overflow the
// millisecond is advanced by one. Because ULIDs encode in Crockford
// base32 of fixed width, increasing ids compare increasing as strings.
//
// A Sequencer is safe for concurrent use; ordering is the order in which
// concurrent callers acquire its lock.
type Sequencer struct {
	mu   sync.Mutex
	last ulid.ULID
	// floor is the smallest millisecond of the next id (LeaveMillisecond,
	// Pass).
	floor uint64
	// first is the first id this sequencer issued (zero: none yet).
	first ulid.ULID
	now   func() time.Time
}

// NewSequencer returns a sequencer whose ids all sort after last (an
// event id, or "" for a new session). now may be nil for time.Now.
func NewSequencer(last string, now func() time.Time) (*Sequencer, error) {
	s := &Sequencer{now: now}
	if s.now == nil {
		s.now = time.Now
	}
	if last != "" {
		u, err := ParseID(last)
		if err != nil {
			return nil, err
		}
		s.last = u
	}
	return s, nil
}

// Next returns the next id and the time it was issued at.
func (s *Sequencer) Next() (string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	id := s.nextLocked(now)
	if s.first == (ulid.ULID{}) {
		s.first = id
	}
	return IDPrefix + id.String(), now
}

func (s *Sequencer) nextLocked(now time.Time) ulid.ULID {
	ms := max(ulid.Timestamp(now), s.last.Time(), s.floor)
	var id ulid.ULID
	if ms == s.last.Time() && s.last != (ulid.ULID{}) {
		id = s.last
		if incEntropy(&id) {
			s.last = id
			return id
		}
		ms++ // entropy exhausted within this millisecond
	}
	_ = id.SetTime(ms)
	var e [10]byte
	_, _ = rand.Read(e[:])
	e[0] &= 0x7f // leave headroom for increments within the millisecond
	_ = id.SetEntropy(e[:])
	s.last = id
	return id
}

// incEntropy adds one to the 80-bit entropy of id and reports false on
// overflow (id is then unchanged).
func incEntropy(id *ulid.ULID) bool {
	c := *id
	for i := 15; i >= 6; i-- {
		c[i]++
		if c[i] != 0 {
			*id = c
			return true
		}
	}
	return false
}

// LeaveMillisecond makes every later id sort after every id of the
// last id's millisecond. A process that opens a session from its stored
// history calls it: the earlier process may have issued streaming ids
// after the last stored one, never stored, in that same millisecond;
// continuing from the stored id by one would issue them again.
func (s *Sequencer) LeaveMillisecond() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == (ulid.ULID{}) {
		return
	}
	s.floor = s.last.Time() + 1
}

// Pass makes every later id sort after id, which the sequencer did not
// issue (a client's cursor: a streaming event of an earlier process,
// never stored), in a later millisecond than id's, with fresh entropy;
// it reports true. If the sequencer has already issued an id at or
// before id (the earlier process's clock ran ahead of this one's),
// nothing can order those after it: Pass then reports false and changes
// nothing.
func (s *Sequencer) Pass(id string) (bool, error) {
	u, err := ParseID(id)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first != (ulid.ULID{}) && s.first.Compare(u) <= 0 {
		return false, nil
	}
	s.floor = max(s.floor, u.Time()+1)
	return true, nil
}

// Observe makes every later id sort after id (an event id, or "" for
// nothing), for a sequencer that takes over the ids of another session.
func (s *Sequencer) Observe(id string) error {
	if id == "" {
		return nil
	}
	u, err := ParseID(id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.Compare(s.last) > 0 {
		s.last = u
	}
	return nil
}

// ParseID parses an "evt_" id into its ULID.
func ParseID(id string) (ulid.ULID, error) {
	rest, ok := strings.CutPrefix(id, IDPrefix)
	if !ok {
		return ulid.ULID{}, fmt.Errorf("event id %q: missing %q prefix", id, IDPrefix)
	}
	u, err := ulid.ParseStrict(rest)
	if err != nil {
		return ulid.ULID{}, fmt.Errorf("event id %q: %w", id, err)
	}
	return u, nil
}

// IDTime returns the time encoded in an event id.
func IDTime(id string) (time.Time, error) {
	u, err := ParseID(id)
	if err != nil {
		return time.Time{}, err
	}
	return ulid.Time(u.Time()), nil
}

// NewID returns a fresh prefixed ULID for other entities (sessions,
// turns, messages). These need uniqueness, not a per-session order.
func NewID(prefix string) string {
	return prefix + ulid.Make().String()
}

// errNoIDBefore is IDBefore's answer for the smallest id.
var errNoIDBefore = errors.New("event: no id before the smallest one")
