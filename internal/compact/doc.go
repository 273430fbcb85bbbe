// Package compact owns how a long conversation is made to fit its
// model's context window (docs/context.md): the model's view of a
// stored conversation (View), the estimate of a request's size between
// the provider's counts (Estimate), when to compact (Limits), what a
// compaction does (NewPlan: stub old tool results, else summarise the
// older part and keep the recent turns verbatim, never splitting a
// tool_use from its tool_result), the summary request and its
// transcript, and the compaction block that records the result.
//
// Stored messages are never changed or deleted. A compaction appends a
// message holding one compaction block, and the model's view is a pure
// function of the stored messages and the newest compaction block, so
// the request a session sends next is reproducible from the store after
// a restart. The package is pure: it calls no model and emits nothing;
// the agent loop runs the summary call and commits the result.
//
// compact imports message and model only.
package compact
