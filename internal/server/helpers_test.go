package server_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func readFile(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	return strings.TrimSpace(string(b)), err
}

// processAlive reports whether pid names a live (non-zombie) process.
func processAlive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 || syscall.Kill(n, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}
