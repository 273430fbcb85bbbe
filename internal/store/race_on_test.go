//go:build race

package store

// raceEnabled is true under the race detector, which slows the
// transpiled SQLite by an order of magnitude; long tests scale down.
const raceEnabled = true
