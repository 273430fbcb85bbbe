package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// shieldChildArg0 runs the test binary as a program that shields itself
// (TestMain), for TestShield.
const shieldChildArg0 = "sandbox-shield-child"

func TestMain(m *testing.M) {
	if os.Args[0] == shieldChildArg0 {
		os.Exit(shieldChild())
	}
	os.Exit(m.Run())
}

// shieldChild shields itself, keeping PATH and HOME visible, then
// reports on stdout what it sees: its pid, whether it is dumpable, the
// value of FAKE_API_KEY in its (Go) environment, whether the marker is
// left; and waits for stdin to close.
func shieldChild() int {
	err := Shield(func(env []string) []string {
		return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
			return !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "HOME=")
		})
	})
	dumpable, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	_, marker := os.LookupEnv(shieldEnv)
	fmt.Printf("pid=%d dumpable=%d key=%s marker=%v err=%v\n", os.Getpid(), dumpable, os.Getenv("FAKE_API_KEY"), marker, err)
	in := bufio.NewReader(os.Stdin)
	line, _ := in.ReadString('\n')
	fmt.Printf("read=%s", line)
	_, _ = io.Copy(io.Discard, in)
	return 0
}
