// Package sandbox owns the isolation of tool processes: what keeps a
// command the model runs away from the server, its keys and its home,
// and from the rest of the machine.
//
//   - The server's own hardening (shield_linux.go): the environment the
//     kernel shows in /proc/<pid>/environ holds no credentials (one
//     re-exec at start hands the original environment over through a
//     memfd), and the process is not dumpable and writes no core dump,
//     so /proc/<pid>/mem, environ and fd are closed to the processes of
//     its user.
//   - The escaped-process sweep (reap_linux.go): the server is a child
//     subreaper, so the processes of a call whose supervisor was killed
//     are re-parented to it; it kills and reaps them, and only them (it
//     tells them from its own children by the pidfd the os package
//     holds for every process it started).
//   - The Landlock probe (status.go): the kernel's ABI and what the
//     sandbox can enforce with it, reported at start and to the
//     permission policy.
//   - The rules of one call (policy.go, rules.go): the workspace, the
//     call's temporary directory and the tool caches writable; the
//     whole filesystem readable except the hidden paths (the metis home,
//     credentials in the user's home) and the devices; no TCP unless
//     allowed.
//   - The exec stage (stage_linux.go): a re-exec of the metis binary,
//     started by the shell's supervisor, that drops capabilities, enters
//     the Landlock domain and a seccomp filter, and execs the command. It
//     is the only place a Landlock domain is entered: never the server,
//     never one thread of a Go process.
//
// sandbox imports go-landlock and golang.org/x/sys/unix, no metis
// package; the shell tool (internal/tool) uses it, and the server wires
// its settings and status.
package sandbox
