//go:build linux && (amd64 || arm64)

package sandbox

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompSupported: the seccomp filter below exists for this
// architecture.
const seccompSupported = true

// installSeccomp adds, to the calling thread, the filter a confined
// command without network gets: Landlock (below ABI 10) restricts
// classic TCP only, so the filter refuses what would get around it.
//
//   - socket(…, IPPROTO_MPTCP): Multipath TCP connects and listens like
//     TCP but is not checked by Landlock's TCP rules. Refused with
//     EPROTONOSUPPORT, which programs (Go's net package among them) take
//     as "no Multipath TCP here" and fall back to TCP, which Landlock
//     checks.
//   - io_uring_setup: io_uring creates sockets without the socket(2)
//     system call this filter inspects. Refused with ENOSYS, as on
//     kernels without io_uring.
//   - system calls of another architecture (i386 or x32 on amd64): they
//     number their calls differently (i386 creates sockets through
//     socketcall(2)). Refused with ENOSYS.
//
// The caller has set no_new_privs (landlock_restrict_self requires it).
func installSeccomp() error {
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		allo = unix.SECCOMP_RET_ALLOW
		// offsets in struct seccomp_data
		offNr   = 0
		offArch = 4
		offArg2 = 16 + 2*8 // the low half on a little-endian machine
	)
	nosys := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	noproto := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPROTONOSUPPORT))
	f := []unix.SockFilter{
		/* 0 */ {Code: ldW, K: offArch},
		/* 1 */ {Code: jeq, K: auditArch, Jt: 0, Jf: 9}, // → 11 nosys
		/* 2 */ {Code: ldW, K: offNr},
		/* 3 */ {Code: jge, K: x32Bit, Jt: 7, Jf: 0}, // → 11 nosys
		/* 4 */ {Code: jeq, K: unix.SYS_IO_URING_SETUP, Jt: 6, Jf: 0}, // → 11 nosys
		/* 5 */ {Code: jeq, K: unix.SYS_SOCKET, Jt: 1, Jf: 0}, // → 7
		/* 6 */ {Code: ret, K: allo},
		/* 7 */ {Code: ldW, K: offArg2},
		/* 8 */ {Code: jeq, K: unix.IPPROTO_MPTCP, Jt: 1, Jf: 0}, // → 10 noproto
		/* 9 */ {Code: ret, K: allo},
		/* 10 */ {Code: ret, K: noproto},
		/* 11 */ {Code: ret, K: nosys},
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0)
}
