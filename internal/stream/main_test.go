package stream_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(cleanupM{m}) }

// cleanupM runs the tests, then removes what benchmarks shared between
// their runs (storeHistory).
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	defer removeStoreHistory()
	return c.m.Run()
}

// storeHistory is the home of BenchmarkReplay10kStore's server and the
// session of its history, made by the first run in this process and
// shared by every later one (-test.count): making the history is most
// of a run's time, and the store path's figure needs no fresh one. A
// replay from the store does not depend on what the process did before
// (the windows are off, and a restarted server starts with none). The
// directory is removed when the tests end (TestMain).
var storeHistory struct {
	home, sid string
}

// removeStoreHistory removes storeHistory's home, if a benchmark made
// one.
func removeStoreHistory() {
	if storeHistory.home != "" {
		_ = os.RemoveAll(storeHistory.home)
	}
}
