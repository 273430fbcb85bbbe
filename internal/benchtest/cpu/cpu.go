//go:build unix

// Package cpu measures what benchmarks cost in CPU time: the process's
// CPU time (getrusage), and a per-delta report for benchmarks that run
// one whole model stream per iteration.
//
// It imports the standard library only, so that a package's own
// benchmarks (the model adapters') can use it without an import cycle;
// internal/benchtest, which starts whole servers, cannot be. Only tests
// and benchmarks import it.
package cpu

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// Time is the CPU time this process used so far (getrusage: every
// thread, user and system), or 0 if the system does not say. Unlike
// wall time it barely moves with the load of other processes on a
// shared machine; with the clients in a child process it is the
// server's.
func Time() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// PerDelta runs one whole stream of deltas deltas per iteration and
// reports ns/delta, cpu-ns/delta (process CPU time, all goroutines and
// the GC included), allocs/delta and B/delta besides the per-stream
// figures.
func PerDelta(b *testing.B, deltas int, stream func()) {
	b.Helper()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := Time()
	n := 0
	for b.Loop() {
		stream()
		n++
	}
	used := Time() - start
	runtime.ReadMemStats(&after)
	total := float64(n * deltas)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/delta")
	b.ReportMetric(float64(used.Nanoseconds())/total, "cpu-ns/delta")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/delta")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/total, "B/delta")
}
