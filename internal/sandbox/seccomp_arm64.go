//go:build linux

package sandbox

import "golang.org/x/sys/unix"

const (
	// auditArch is this architecture in seccomp_data.arch.
	auditArch = unix.AUDIT_ARCH_AARCH64
	// x32Bit: arm64 has no second numbering in this range; a number this
	// high is no system call.
	x32Bit = 0x40000000
)
