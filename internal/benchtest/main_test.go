package benchtest_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/benchtest"
)

// testChildEnv makes this test binary, re-executed by StartChild, the
// echo child of TestChildSpeaksLines.
const testChildEnv = "METIS_BENCHTEST_TEST_CHILD"

func TestMain(m *testing.M) {
	if benchtest.IsReplayClient() {
		os.Exit(benchtest.ServeReplays())
	}
	if os.Getenv(testChildEnv) != "" {
		os.Exit(echoChild())
	}
	goleak.VerifyTestMain(m)
}

// echoChild tells "ready", answers each line of its input with the
// line in upper case, and ends with "bye" when its input closes; it
// exits 3 on a line "fail".
func echoChild() int {
	benchtest.Tell("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "fail" {
			return 3
		}
		benchtest.Tell(strings.ToUpper(in.Text()))
	}
	fmt.Println("bye")
	return 0
}
