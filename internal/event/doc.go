// Package event owns the core's event type: the Event struct with its
// envelope encoding (contract §4), sealed once and shared by every
// consumer, and the per-session id sequencer.
//
// The wire vocabulary it carries (event type names, families, presets,
// actors) belongs to the public protocol package; the names here are
// aliases of protocol's, so the core can say event.TextDelta while each
// wire name is spelled once. event imports protocol, the standard
// library and the ULID package, and every package of the core may
// import it.
package event
