package sandbox

import (
	"sync"
)

// The processes of running shell calls. The shell registers each
// supervisor while its call runs; everything the command starts stays
// below it (it is a child subreaper, and a confined command cannot kill
// it). The server asks FromShellCall about the peer of a unix-socket
// connection: Landlock below ABI 9 does not restrict connecting to a
// pathname unix socket, and a command must not drive the server's API
// through <home>/metis.sock.

var (
	callsMu     sync.Mutex
	supervisors = map[int]int{} // pid -> registrations
)

// TrackSupervisor records pid as the supervisor of a running call until
// the returned function is called.
func TrackSupervisor(pid int) (untrack func()) {
	callsMu.Lock()
	supervisors[pid]++
	callsMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			callsMu.Lock()
			defer callsMu.Unlock()
			if supervisors[pid]--; supervisors[pid] <= 0 {
				delete(supervisors, pid)
			}
		})
	}
}

// maxAncestry bounds the walk up the process tree.
const maxAncestry = 256

// FromShellCall reports whether pid is a process of a running shell
// call: a supervisor or one of its descendants. While a call runs and
// the process tree cannot be read (the process is gone, or /proc says
// nothing), it answers true: a caller refusing a connection on it fails
// closed.
func FromShellCall(pid int) bool {
	callsMu.Lock()
	n := len(supervisors)
	sup := make(map[int]bool, n)
	for p := range supervisors {
		sup[p] = true
	}
	callsMu.Unlock()
	if n == 0 {
		return false
	}
	for hop := 0; hop < maxAncestry && pid > 1; hop++ {
		if sup[pid] {
			return true
		}
		pp, ok := parentPid(pid)
		if !ok {
			return true
		}
		pid = pp
	}
	return false
}
