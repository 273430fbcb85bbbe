//go:build race

package spectest_test

// raceEnabled scales down the tests whose cost is dominated by
// per-event work, which the race detector multiplies.
const raceEnabled = true
