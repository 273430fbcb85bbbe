//go:build !linux

package tool

import (
	"os/exec"
	"time"
)

// supervisorMargin is unused without a supervisor.
const supervisorMargin = 0

// shellCommand runs /bin/sh directly: without Linux's child subreaper
// there is no supervisor, and only the process group is killed.
func shellCommand(command string, _ time.Duration) (*exec.Cmd, bool) {
	return exec.Command("/bin/sh", "-c", command), false
}
