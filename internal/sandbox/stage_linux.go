package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The exec stage. The shell's supervisor does not start /bin/sh itself:
// it starts the metis binary again (/proc/self/exe) under the name
// stageArg0, which init below recognises before anything else runs.
// On its one locked OS thread the stage
//
//  1. builds the Landlock ruleset of the policy (while it still has the
//     rights to list the directories it needs);
//  2. drops capabilities (every tool process loses those that reach
//     other processes; a confined one keeps only a few);
//  3. for a confined policy, sets no_new_privs and enters the Landlock
//     domain, then the seccomp filter when the network is off;
//  4. execs the command from that same thread.
//
// execve keeps the calling thread's credentials and Landlock domain and
// ends every other thread, so the command and all it starts are
// confined, while the supervisor, its parent, stays outside: with
// Landlock ABI 6 the command cannot signal it (nor the server). Any
// failure ends the stage with exit code 126 and a message on stderr:
// the command never runs less confined than asked.

// stageArg0 is argv[0] of the exec stage: [stageArg0, policy, argv...].
const stageArg0 = "metis-sandbox-exec"

// StageExitCode is the exit code of a stage that could not apply its
// policy (the command did not run).
const StageExitCode = 126

func init() {
	if len(os.Args) >= 3 && os.Args[0] == stageArg0 {
		runtime.LockOSThread() // never unlocked: the thread execs
		err := stage(os.Args[1], os.Args[2:])
		fmt.Fprintf(os.Stderr, "metis: sandbox: %v\n", err)
		os.Exit(StageExitCode)
	}
}

// StageCommand returns the path and argv that run argv under p through
// the exec stage. The caller (the supervisor) starts it from the metis
// binary, with the environment and directory the command gets.
func StageCommand(p Policy, argv []string) (path string, args []string) {
	return "/proc/self/exe", append([]string{stageArg0, p.Encode()}, argv...)
}

// StageCommandEncoded is StageCommand for a policy already encoded
// (the supervisor passes on what the server encoded).
func StageCommandEncoded(policy string, argv []string) (path string, args []string) {
	return "/proc/self/exe", append([]string{stageArg0, policy}, argv...)
}

// stage applies the encoded policy to this thread and execs argv; it
// returns only on failure.
func stage(encoded string, argv []string) error {
	p, err := decodePolicy(encoded)
	if err != nil {
		return err
	}
	fd, flags := -1, uint32(0)
	if p.Confine {
		if fd, flags, err = p.ruleset(); err != nil {
			return err
		}
		if fd < 0 {
			return errors.New("the kernel cannot enforce the sandbox (no Landlock)")
		}
		defer unix.Close(fd)
	}
	if err := dropCaps(p.Confine); err != nil {
		return err
	}
	if p.Confine {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
		if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
			return fmt.Errorf("landlock_restrict_self: %w", err)
		}
		if !p.Network {
			if err := installSeccomp(); err != nil {
				return fmt.Errorf("seccomp: %w", err)
			}
		}
	}
	return syscall.Exec(argv[0], argv, os.Environ())
}

// ruleset builds the Landlock ruleset of a confined policy: every
// filesystem right this kernel knows restricted and granted as plan
// says; TCP (and, from ABI 10, UDP) restricted unless the policy allows
// the network; both scopes (signals, abstract unix sockets). From ABI 9
// it also refuses connecting to a pathname unix socket made outside the
// sandbox (the server's <home>/metis.sock among them).
func (p Policy) ruleset() (int, uint32, error) {
	cfg := landlock.V11
	if p.Network {
		cfg.HandledAccessNet = 0
	}
	var rules []landlock.Rule
	for _, g := range plan(p) {
		rules = append(rules, landlock.PathAccess(landlock.AccessFSSet(g.access), g.path).IgnoreIfMissing())
	}
	return cfg.BestEffort().NewRulesetFD(rules...)
}
