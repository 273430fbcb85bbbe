//go:build unix

package cpu_test

import (
	"testing"

	"github.com/metis-agent/metis/internal/benchtest/cpu"
)

// TestTimeMovesWithWork: spinning for a while shows as CPU time.
func TestTimeMovesWithWork(t *testing.T) {
	start := cpu.Time()
	if start <= 0 {
		t.Fatalf("CPU time %v at start", start)
	}
	x := 0
	for cpu.Time()-start < 5e6 { // 5 ms of CPU
		x++
	}
	if x == 0 {
		t.Fatal("no work measured")
	}
}
