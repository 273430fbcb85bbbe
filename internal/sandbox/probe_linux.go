package sandbox

import (
	"errors"
	"fmt"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// probe asks the kernel for its Landlock ABI. Like go-landlock, it
// counts an ABI 6 or newer whose signal-scoping erratum is not fixed as
// ABI 5: go-landlock then leaves the scopes out.
func probe() Status {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		switch {
		case errors.Is(err, syscall.ENOSYS):
			err = errors.New("this kernel has no Landlock (it needs Linux 5.13 or newer built with CONFIG_SECURITY_LANDLOCK)")
		case errors.Is(err, syscall.EOPNOTSUPP):
			err = errors.New("the kernel has Landlock disabled (add landlock to the lsm= boot parameter)")
		default:
			err = fmt.Errorf("asking the kernel for Landlock: %w", err)
		}
		return statusFor(0, err)
	}
	if v >= 6 {
		if errata, err := ll.LandlockGetErrata(); err != nil || errata&0x2 == 0 {
			v = 5
		}
	}
	s := statusFor(v, nil)
	if s.Available && !seccompSupported {
		s.Reason = join(s.Reason, "Multipath TCP and io_uring are not filtered on this architecture")
	}
	return s
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
