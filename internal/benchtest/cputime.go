//go:build unix

package benchtest

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time this process used so far (getrusage: every
// thread, user and system), or 0 if the system does not say. Unlike
// wall time it barely moves with the load of other processes on a
// shared machine; with the clients in a child process it is the
// server's.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
