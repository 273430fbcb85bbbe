//go:build linux

package sandbox

import "golang.org/x/sys/unix"

const (
	// auditArch is this architecture in seccomp_data.arch.
	auditArch = unix.AUDIT_ARCH_X86_64
	// x32Bit marks the system calls of the x32 ABI.
	x32Bit = 0x40000000
)
