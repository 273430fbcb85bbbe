package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The server's shield. /proc/<pid>/environ shows the environment a
// process was started with (the strings on its initial stack), whatever
// it did with it since, to every process of the same user: a tool
// command reading its ancestors' environ would find the provider keys
// the server was started with. So the metis binary, first thing in
// main, re-execs itself once (same pid, same open files and terminal)
// with only the variables a tool may see, and hands the complete
// environment over through a memfd whose number it passes in
// shieldEnv; the re-exec'd process reads it back into Go's environment
// (os.Setenv changes Go's copy, never the initial stack), closes it and
// drops the marker. Then it makes itself non-dumpable, which closes
// /proc/<pid>/environ, mem, fd, maps and the like to every process
// without CAP_SYS_PTRACE (tool processes drop it), and sets its core
// size limit to 0.

// shieldEnv names the memfd in the re-exec'd process's environment. It
// starts with METIS_, so it never reaches a tool (IsSecretEnv), and it
// is removed as soon as it has been read.
const shieldEnv = "METIS_SHIELD_FD"

// memfdName names the memfd holding the environment.
const memfdName = "metis-environ"

// Shield is the first thing the metis binary's main does. visible
// returns, from the process's environment, the variables that may stay
// visible in /proc/<pid>/environ (a tool gets them anyway). When the
// environment holds anything else, Shield re-execs the binary with
// only those and does not return; in the re-exec'd process it restores
// the complete environment. Either way it then hardens the process
// (Harden). An error means the environment could not be hidden (or
// restored): the process goes on with the environment it has, and the
// caller should say so.
func Shield(visible func(environ []string) []string) error {
	if fd, ok := os.LookupEnv(shieldEnv); ok {
		// The re-exec'd process. It never re-execs again, so a failure
		// here cannot loop.
		err := restore(fd)
		_ = os.Unsetenv(shieldEnv)
		return errors.Join(err, Harden())
	}
	return errors.Join(reexec(visible), Harden())
}

// runtimeEnv are variables the Go runtime reads at start, before
// Shield runs: they stay visible (they hold no secrets), or the
// re-exec'd process would run without them.
var runtimeEnv = []string{"GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG", "GOTRACEBACK", "GOCOVERDIR"}

// reexec re-execs the binary with only the visible environment when
// the environment holds more; it returns only when it did not exec
// (nil: nothing to hide).
func reexec(visible func([]string) []string) error {
	env := os.Environ()
	keep := visible(env)
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); slices.Contains(runtimeEnv, name) {
			keep = append(keep, kv)
		}
	}
	if hidesNothing(env, keep) {
		return nil
	}
	fd, err := unix.MemfdCreate(memfdName, 0) // inherited across the exec
	if err != nil {
		return fmt.Errorf("hide the environment: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), memfdName)
	defer f.Close() // only reached when the exec failed
	var buf bytes.Buffer
	for _, kv := range env {
		buf.WriteString(kv)
		buf.WriteByte(0)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("hide the environment: %w", err)
	}
	next := append(slices.Clip(keep), shieldEnv+"="+strconv.Itoa(fd))
	err = syscall.Exec(self(), os.Args, next)
	return fmt.Errorf("hide the environment: re-exec: %w", err)
}

// self is the path of the running binary: its name, not /proc/self/exe,
// so that the process keeps its name (ps, pgrep) after the re-exec.
func self() string {
	p, err := os.Readlink("/proc/self/exe")
	if err != nil || strings.HasSuffix(p, " (deleted)") {
		return "/proc/self/exe"
	}
	return p
}

// hidesNothing reports whether keep holds every entry of env.
func hidesNothing(env, keep []string) bool {
	have := make(map[string]bool, len(keep))
	for _, kv := range keep {
		have[kv] = true
	}
	for _, kv := range env {
		if !have[kv] {
			return false
		}
	}
	return true
}

// restore reads the environment from the memfd named by fdArg (which
// must be a memfd this package made) into Go's environment, replacing
// it, and closes the memfd.
func restore(fdArg string) error {
	fd, err := strconv.Atoi(fdArg)
	if err != nil || fd < 3 {
		return fmt.Errorf("%s=%q is not a descriptor", shieldEnv, fdArg)
	}
	link, err := os.Readlink("/proc/self/fd/" + fdArg)
	if err != nil || !strings.HasPrefix(link, "/memfd:"+memfdName) {
		return fmt.Errorf("%s=%s is not the environment's memfd", shieldEnv, fdArg)
	}
	f := os.NewFile(uintptr(fd), memfdName)
	defer f.Close()
	b, err := readAllAt(f)
	if err != nil {
		return fmt.Errorf("restore the environment: %w", err)
	}
	os.Clearenv()
	for _, kv := range strings.Split(string(b), "\x00") {
		if name, value, ok := strings.Cut(kv, "="); ok && name != "" {
			_ = os.Setenv(name, value)
		}
	}
	return nil
}

// readAllAt reads f from its start.
func readAllAt(f *os.File) ([]byte, error) {
	return io.ReadAll(io.NewSectionReader(f, 0, math.MaxInt64))
}

// Harden makes this process non-dumpable (PR_SET_DUMPABLE 0: its
// /proc/<pid> files belong to root and open only to a process with
// CAP_SYS_PTRACE) and sets its core-dump size limit to 0. A tool
// process is not affected: exec resets the dumpable flag, and the
// shell's supervisor hardens itself too.
func Harden() error {
	var errs []error
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err))
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}); err != nil {
		errs = append(errs, fmt.Errorf("setrlimit(RLIMIT_CORE, 0): %w", err))
	}
	return errors.Join(errs...)
}
