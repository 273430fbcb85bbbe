package clusterbench_test

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The replay benchmark's client: this binary re-executed.
	if os.Getenv(replayChildEnv) != "" {
		os.Exit(replayChild())
	}
	raiseNoFile()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// raiseNoFile lifts the soft file-descriptor limit to the hard one:
// the fan-out benchmark holds 300 clients, both ends in this process.
func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
