package store

import (
	"errors"
	"sync/atomic"

	"github.com/metis-agent/metis/internal/event"
)

// ErrInjected is the error a fault hook typically returns; it stands for
// a disk that is full or failing.
var ErrInjected = errors.New("store: injected fault")

// FaultFunc decides whether one write transaction fails. It is called on
// the writer goroutine, just before COMMIT, with the ops of the
// submissions in the transaction, in order; a non-nil error rolls the
// transaction back and is handled exactly like a failed COMMIT (a disk
// full or an I/O error): the writer retries the batch's submissions one
// per transaction (calling the hook again for each), and those that
// still fail get the error in their done callbacks.
//
// Predicates see single submissions in those retries, so "every
// transaction holding a turn.completed" fails exactly the submissions
// that hold one. The ops must not be kept or modified.
type FaultFunc func(ops []Op) error

// faultHook holds the installed FaultFunc; the writer reads it once per
// transaction (one atomic load when none is installed).
type faultHook struct{ p atomic.Pointer[FaultFunc] }

// SetFault installs f as the store's fault hook, or removes the hook
// when f is nil. It is a test seam for storage failures: production code
// never calls it. It is safe to call at any time; transactions already
// past their hook check are not affected.
func (s *Store) SetFault(f FaultFunc) {
	if f == nil {
		s.fault.p.Store(nil)
		return
	}
	s.fault.p.Store(&f)
}

// injected runs the fault hook, if any, over the live submissions of
// batch.
func (s *Store) injected(batch []submission, errs []error) error {
	f := s.fault.p.Load()
	if f == nil {
		return nil
	}
	var ops []Op
	for i := range batch {
		if errs[i] == nil {
			ops = append(ops, batch[i].ops...)
		}
	}
	return (*f)(ops)
}

// FailMatching returns a FaultFunc failing, with ErrInjected, the first
// times transactions that match reports true for; every other
// transaction commits. match nil matches every transaction. A submission
// fails for good once its grouped transaction and its retry alone both
// fail: times 2 loses exactly one submission that match singles out.
func FailMatching(times int64, match func(ops []Op) bool) FaultFunc {
	var left atomic.Int64
	left.Store(times)
	return func(ops []Op) error {
		if match != nil && !match(ops) {
			return nil
		}
		if left.Add(-1) >= 0 {
			return ErrInjected
		}
		return nil
	}
}

// HasEvent reports whether ops append an event of type typ; with
// FailMatching it singles out the submission of one event.
func HasEvent(ops []Op, typ event.Type) bool {
	for _, op := range ops {
		var ev *event.Event
		switch op := op.(type) {
		case AppendEvent:
			ev = op.Event
		case *AppendEvent:
			ev = op.Event
		}
		if ev != nil && ev.Type == typ {
			return true
		}
	}
	return false
}
