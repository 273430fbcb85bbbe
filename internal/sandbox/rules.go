package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Landlock access rights of the sandbox's grants.
const (
	// accessRead reads files and directories and executes files.
	accessRead = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	// accessWrite also creates, changes, moves and removes files and
	// directories. Not granted anywhere: creating devices (MAKE_CHAR,
	// MAKE_BLOCK: a block device node would read the disk under every
	// rule) and ioctl on devices.
	accessWrite = accessRead | ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
		ll.AccessFSMakeSym | ll.AccessFSTruncate | ll.AccessFSRefer
	// accessFile are the rights that apply to a file (not a directory).
	accessFile = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	// accessDevice reads and writes a harmless character device.
	accessDevice = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	// accessTerminal also allows the terminal ioctls.
	accessTerminal = accessDevice | ll.AccessFSIoctlDev
)

// devices are what a confined command may open under /dev, which is
// otherwise hidden: /dev holds the disks (readable by root under any
// read rule, and with them every file) and the memory devices.
var devices = []struct {
	path   string
	access uint64
}{
	{"/dev/null", accessDevice}, {"/dev/zero", accessDevice}, {"/dev/full", accessDevice},
	{"/dev/random", accessDevice}, {"/dev/urandom", accessDevice},
	{"/dev/tty", accessTerminal}, {"/dev/ptmx", accessTerminal}, {"/dev/pts", accessTerminal},
}

// grant is one Landlock rule: access beneath path.
type grant struct {
	path   string
	access uint64
}

// plan returns the filesystem grants of a confined policy:
//
//   - read on the whole filesystem, except the hidden paths and /dev:
//     Landlock rules only add access, so a directory holding a hidden
//     path is not granted as a whole; each of its entries is, but the
//     hidden one (recursively along the path), and the directory itself
//     keeps only the right to list it;
//   - the devices above;
//   - read and write on each writable path, again except the hidden
//     paths below it.
//
// Paths are resolved (symlinks followed) first: Landlock sees the real
// hierarchy. A symlink met among the entries gets no rule (its target
// has its own). Paths that do not exist are left out.
func plan(p Policy) []grant {
	hidden := []string{"/dev"}
	for _, h := range p.Hidden {
		if r, err := filepath.EvalSymlinks(h); err == nil {
			hidden = append(hidden, r)
		}
	}
	out := expand("/", accessRead, hidden)
	for _, d := range devices {
		if _, err := os.Stat(d.path); err == nil {
			out = append(out, grant{d.path, d.access})
		}
	}
	for _, w := range p.Writable {
		if r, err := filepath.EvalSymlinks(w); err == nil {
			out = append(out, expand(r, accessWrite, hidden)...)
		}
	}
	return out
}

// expand grants access beneath path except the hidden paths below it.
func expand(path string, access uint64, hidden []string) []grant {
	below := slices.ContainsFunc(hidden, func(h string) bool { return under(h, path) })
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if !fi.IsDir() {
		return []grant{{path, access & accessFile}}
	}
	if !below {
		return []grant{{path, access}}
	}
	var out []grant
	if a := access & ll.AccessFSReadDir; a != 0 {
		out = append(out, grant{path, a})
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return out
	}
	for _, e := range ents {
		child := filepath.Join(path, e.Name())
		if e.Type()&os.ModeSymlink != 0 || slices.Contains(hidden, child) {
			continue
		}
		out = append(out, expand(child, access, hidden)...)
	}
	return out
}

// under reports whether p lies strictly below dir.
func under(p, dir string) bool {
	if dir == "/" {
		return p != "/" && strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, dir+"/")
}
