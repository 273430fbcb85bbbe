//go:build !linux

package clustertest_test

import "syscall"

// childProcAttr: only Linux kills a child when its parent dies; other
// systems leave the children of a test binary that panicked running.
func childProcAttr() *syscall.SysProcAttr { return nil }
