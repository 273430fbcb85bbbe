//go:build !linux

package tool

import (
	"os/exec"
	"time"

	"github.com/metis-agent/metis/internal/sandbox"
)

// shellProcessNote is what the shell tool's description promises about
// the command's processes.
const shellProcessNote = "Processes the command starts in its process group are stopped when it exits or the call is cancelled; a process that leaves the group (setsid) may outlive the call."

// supervisorMargin is unused without a supervisor.
const supervisorMargin = 0

// shellCommand runs /bin/sh directly: without Linux's child subreaper
// there is no supervisor, and only the process group is killed.
func shellCommand(command string, _ time.Duration, _ sandbox.Policy) (*exec.Cmd, bool) {
	return exec.Command("/bin/sh", "-c", command), false
}
