package spectest_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(procServerEnv) != "" {
		// A server the tests can kill the hard way (crash_test.go).
		os.Exit(runProcServer())
	}
	goleak.VerifyTestMain(m)
}
