// Package event owns the event model of metis: the envelope every event
// shares (contract §4), the closed catalog of event types split into the
// persisted catalog family and the transient streaming family, the
// subscription presets, and the per-session id sequencer.
//
// It is the innermost package of the core: it imports only the standard
// library and the ULID package, and every other package may import it.
package event
