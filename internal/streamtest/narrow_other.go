//go:build !linux

package streamtest

import "testing"

// ConnectNarrow needs Linux socket options to shrink a socket's receive
// window; elsewhere it skips the test.
func ConnectNarrow(t testing.TB, tr Transport, base, sessionID string) Conn {
	t.Helper()
	t.Skip("shrinking a socket's receive window needs Linux socket options")
	return nil
}
