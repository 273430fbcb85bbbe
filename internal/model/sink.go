package model

import "context"

// DeltaSink is what an adapter's stream translator emits through: it
// drops every delta once the call's context is done, and remembers
// whether a delta got out (a call that emitted is never retried) and
// what emit returned. Adapters embed it in their translators.
type DeltaSink struct {
	Ctx  context.Context   // the call's context
	Emit func(Delta) error // the loop's emit, from Adapter.Stream

	Emitted bool  // a delta reached Emit
	Err     error // what Emit returned, if it failed: the call stops with it
}

// Send emits one delta unless the call was cancelled meanwhile; it
// returns the cancellation or Emit's error.
func (s *DeltaSink) Send(d Delta) error {
	if err := s.Ctx.Err(); err != nil {
		return err
	}
	s.Emitted = true
	if err := s.Emit(d); err != nil {
		s.Err = err
		return err
	}
	return nil
}
