//go:build !linux

package sandbox

// probe: Landlock is Linux's.
func probe() Status {
	return Status{Reason: "Landlock is a Linux security module; this system has none"}
}
