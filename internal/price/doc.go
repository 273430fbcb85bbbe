// Package price owns the price table: what a model call's usage costs in
// US dollars, from list prices per million tokens (DefaultPrices)
// overlaid with config.yaml's `prices`. It is configuration data, read
// by the agent loop when it prices a call; the running totals are the
// cost accumulator's (internal/cost). Beside the prices it keeps the
// models' context windows and output limits (limits.go), overlaid with
// config.yaml's `models` and with what a local server reports.
//
// price imports message only.
package price
