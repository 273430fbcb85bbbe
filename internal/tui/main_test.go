package tui

import (
	"context"
	"os"
	"testing"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/servertest"
)

// mainEnv makes the test binary run the TUI itself (the end-to-end test
// starts it in tmux) instead of the tests.
const mainEnv = "METIS_TUI_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(Run(context.Background(), os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, Options{}))
	}
	code := m.Run()
	removeBuilt()
	servertest.RemoveProcessCert()
	os.Exit(code)
}
