package clustertest_test

import "syscall"

// childProcAttr makes a child process of the test (a NATS server, a
// metis node) die with the test binary: a test binary that panics on
// its timeout runs no cleanup, and its children would otherwise live
// on, holding ports and CPU.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
