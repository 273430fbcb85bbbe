//go:build !linux

package sandbox

import "context"

// Without Linux there is no shield, no subreaper and no exec stage: the
// shell runs /bin/sh in a process group of its own (internal/tool).

// Shield does nothing here.
func Shield(func([]string) []string) error { return nil }

// Harden does nothing here.
func Harden() error { return nil }

// BecomeSubreaper does nothing here.
func BecomeSubreaper() error { return nil }

// SweepEscaped finds nothing here.
func SweepEscaped() int { return 0 }

// WatchEscaped has nothing to watch here.
func WatchEscaped(context.Context) {}

// Descendants cannot be listed here.
func Descendants(int) []int { return nil }

// StageCommand runs argv directly: there is no stage here.
func StageCommand(_ Policy, argv []string) (string, []string) { return argv[0], argv }

// StageCommandEncoded runs argv directly: there is no stage here.
func StageCommandEncoded(_ string, argv []string) (string, []string) { return argv[0], argv }

func parentPid(int) (int, bool) { return 0, false }
