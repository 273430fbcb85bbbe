package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// reachCaps are the capabilities that reach other processes' memory and
// environment, or the kernel's, whatever the file permissions say: a
// root command with CAP_SYS_PTRACE reads a non-dumpable server's
// /proc/<pid>/environ and mem; CAP_SYS_ADMIN, CAP_BPF and CAP_PERFMON
// load tracing programs that read any process's memory; CAP_SYS_RAWIO
// opens /dev/mem and /proc/kcore; CAP_SYS_MODULE loads kernel code;
// CAP_DAC_READ_SEARCH opens files by handle; CAP_CHECKPOINT_RESTORE
// reads /proc/<pid>/map_files. Every tool process loses them, with the
// sandbox or without.
var reachCaps = []int{
	unix.CAP_SYS_PTRACE, unix.CAP_SYS_ADMIN, unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_SYS_RAWIO,
	unix.CAP_SYS_MODULE, unix.CAP_DAC_READ_SEARCH, unix.CAP_CHECKPOINT_RESTORE,
}

// confinedCaps are the only capabilities a confined command keeps (when
// the server runs as root): what ordinary work as root needs (owning
// and changing files, setuid tools, signals, low ports), a subset of a
// container's default set without CAP_NET_RAW (raw packets pass
// Landlock's TCP rules), CAP_MKNOD, CAP_SETPCAP and CAP_SETFCAP.
var confinedCaps = []int{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID, unix.CAP_KILL,
	unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_CHROOT, unix.CAP_AUDIT_WRITE,
}

// capsToDrop returns the capabilities a tool process drops: reachCaps
// when it runs unconfined, everything but confinedCaps when confined.
func capsToDrop(confined bool, lastCap int) []int {
	if !confined {
		return reachCaps
	}
	keep := map[int]bool{}
	for _, c := range confinedCaps {
		keep[c] = true
	}
	var drop []int
	for c := 0; c <= lastCap; c++ {
		if !keep[c] {
			drop = append(drop, c)
		}
	}
	return drop
}

// dropCaps drops capsToDrop from the calling thread's bounding,
// effective, permitted, inheritable and ambient sets. Capabilities are
// per thread: the caller locks its OS thread and execs from it, so the
// command starts with the reduced sets, and a root command (whose
// permitted set after exec is its bounding set) cannot get them back,
// not even through a setuid-root program. A process without
// CAP_SETPCAP (any non-root server) cannot shrink its bounding set: it
// has none of these capabilities to begin with, and that is not an
// error.
func dropCaps(confined bool) error {
	drop := capsToDrop(confined, lastCap())
	for _, c := range drop {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, c := range drop {
		mask := ^uint32(1 << (uint(c) % 32))
		d := &data[c/32]
		d.Effective &= mask
		d.Permitted &= mask
		d.Inheritable &= mask
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the ambient capabilities: %w", err)
	}
	return nil
}

// lastCap is the highest capability this kernel knows.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 && n < 64 {
			return n
		}
	}
	return unix.CAP_LAST_CAP
}
