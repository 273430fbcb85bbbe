package clusterbench_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/benchtest"
)

func TestMain(m *testing.M) {
	// The replay benchmark's client: this binary re-executed.
	if benchtest.IsReplayClient() {
		os.Exit(benchtest.ServeReplays())
	}
	// The fan-out benchmark holds 300 clients, both ends in this
	// process.
	benchtest.RaiseNoFile()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
