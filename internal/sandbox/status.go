package sandbox

import (
	"fmt"
	"sync"
)

// MinABI is the oldest Landlock ABI the sandbox runs with: 4, the first
// that restricts TCP. Below it the sandbox is unavailable: a command
// would keep the network, which the sandbox promises to take away.
const MinABI = 4

// FullABI is the first Landlock ABI with everything the sandbox uses:
// 6 adds the scopes that keep a command from signalling its supervisor
// (or any process outside the sandbox) and from connecting to abstract
// unix sockets outside it.
const FullABI = 6

// Status is what the shell sandbox can do on this system, as reported
// at start (the ready line), in the server's metrics, and to the
// permission policy: when it is not Active, nothing confines a shell
// command, and the policy must ask before each one runs.
type Status struct {
	// Enabled is the setting: false when the user turned the sandbox
	// off (--sandbox=false).
	Enabled bool `json:"enabled"`
	// Available says the kernel can enforce the sandbox: Landlock with
	// ABI MinABI or newer.
	Available bool `json:"available"`
	// ABI is the kernel's Landlock ABI version (0: no Landlock).
	ABI int `json:"abi"`
	// Reason says why the sandbox is unavailable, or what it cannot
	// enforce with this ABI; "" when it is complete.
	Reason string `json:"reason,omitempty"`
}

// Active reports whether shell commands run confined.
func (s Status) Active() bool { return s.Enabled && s.Available }

// String is the status in a few words, for the ready line.
func (s Status) String() string {
	switch {
	case !s.Enabled:
		return "sandbox OFF (--sandbox=false): shell commands run with the server's rights"
	case !s.Available:
		return "sandbox unavailable (" + s.Reason + "): shell commands run unconfined"
	case s.Reason != "":
		return fmt.Sprintf("sandbox landlock ABI %d (%s)", s.ABI, s.Reason)
	}
	return fmt.Sprintf("sandbox landlock ABI %d", s.ABI)
}

var (
	probeOnce sync.Once
	probed    Status
)

// Probe returns the sandbox's status with the setting enabled. The
// kernel is asked once per process; the answer does not change.
func Probe(enabled bool) Status {
	probeOnce.Do(func() { probed = probe() })
	s := probed
	s.Enabled = enabled
	return s
}

// statusFor turns an ABI version (after errata) and the error of asking
// for it into a status.
func statusFor(abi int, err error) Status {
	switch {
	case err != nil:
		return Status{Reason: err.Error()}
	case abi < MinABI:
		return Status{ABI: abi, Reason: fmt.Sprintf("Landlock ABI %d; the sandbox needs %d or newer (Linux 6.7), which restricts TCP", abi, MinABI)}
	case abi < FullABI:
		return Status{Available: true, ABI: abi, Reason: fmt.Sprintf("ABI %d: signals and abstract unix sockets are not scoped; ABI %d (Linux 6.12) scopes them", abi, FullABI)}
	}
	return Status{Available: true, ABI: abi}
}
