// Package cost owns pricing and the cost accumulator. A Table prices a
// model call's usage in US dollars; the Accumulator is a bus subscriber
// that keeps each session's cost_so_far_usd and turn_count from
// turn.started and llm.call_completed / llm.call_failed events.
//
// cost imports event, message, bus and store.
package cost
