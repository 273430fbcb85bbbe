// Package model owns the model adapter interface: how the agent loop asks
// a model for one streamed completion and receives canonical deltas,
// whatever the provider. It also holds the registry that resolves a model
// id ("provider:model") to an adapter, the delta accumulator that turns a
// delta stream into canonical content blocks, the DeltaSink adapters emit
// through (no delta after cancellation; "emitted" decides retries), the
// retry policy, the idle-stream reader, and the error classes of a failed
// call.
//
// Adapters live in sub-packages: builtin (the offline demo), anthropic
// (Messages API) and openai (Chat Completions, also local compatible
// servers). Each registers itself from an init function with
// RegisterProvider (provider.go): its name, the environment variables
// of its settings, its default model and its constructor. The server
// links the sub-packages in and builds the Registry from Providers();
// it knows no provider by name.
//
// model imports message only; it never imports the bus or a transport.
package model
