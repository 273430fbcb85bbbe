// Package cost owns the cost accumulator: a bus subscriber that keeps
// each session's cost_so_far_usd and turn_count from turn.started and
// llm.call_completed / llm.call_failed events, rolling a worker's cost up
// into its planners'. The prices themselves are the price table's
// (internal/price); the accumulator adds the costs the events carry.
//
// cost imports event, bus and store.
package cost
