//go:build unix

package benchtest

import (
	"sync"
	"syscall"
)

var noFileOnce sync.Once

// RaiseNoFile lifts this process's soft limit on open files to the hard
// one (once): the benchmarks hold hundreds of connections, often both
// ends in one process.
func RaiseNoFile() {
	noFileOnce.Do(func() {
		var l syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
			l.Cur = l.Max
			_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
		}
	})
}
