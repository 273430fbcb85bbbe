//go:build !race

package spectest_test

const raceEnabled = false
