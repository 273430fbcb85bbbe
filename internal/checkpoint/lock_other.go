//go:build !unix

package checkpoint

// flock is a no-op where flock does not exist: the process's mutex
// still serializes this server's operations.
func flock(string) (func(), error) { return func() {}, nil }
