package tool

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
)

// The walk of glob and grep: every file below a directory of the
// workspace, through os.Root handles opened one directory at a time
// (each from its parent's, so no path is ever resolved outside the
// workspace), skipping .git directories and what .gitignore files
// ignore, never entering a symbolic link to a directory, and taking a
// symbolic link to a file only when it resolves inside the workspace.

// maxWalkEntries bounds the directory entries one walk looks at.
const maxWalkEntries = 1_000_000

// maxIgnoreBytes bounds a .gitignore file read.
const maxIgnoreBytes = 1 << 20

// dirHandle is an open directory of the walk, closed when the walk and
// every file handed out from it are done with it.
type dirHandle struct {
	root *os.Root
	refs atomic.Int32
}

func (d *dirHandle) acquire() { d.refs.Add(1) }

func (d *dirHandle) release() {
	if d.refs.Add(-1) == 0 {
		d.root.Close()
	}
}

// walkFile is a file the walk found. Its handle is held for the visitor,
// which must call done once finished with it.
type walkFile struct {
	rel  string // workspace-relative
	name string // in dir
	dir  *dirHandle
	link bool // a symbolic link to a regular file in the workspace
}

// open opens the file for reading without blocking (a FIFO swapped in
// since the listing cannot hang the call) and checks it is regular.
func (f walkFile) open(env Env) (*os.File, os.FileInfo, error) {
	var (
		h   *os.File
		err error
	)
	if f.link {
		h, err = env.Root.OpenFile(f.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	} else {
		h, err = f.dir.root.OpenFile(f.name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := h.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	return h, st, nil
}

// info returns the file's information (of the file a link names).
func (f walkFile) info(env Env) (os.FileInfo, error) {
	if f.link {
		return env.Root.Stat(f.rel)
	}
	return f.dir.root.Lstat(f.name)
}

func (f walkFile) done() { f.dir.release() }

// walkStats says what a walk skipped.
type walkStats struct {
	entries int
	stopped bool // maxWalkEntries reached
}

// walkDir is a directory waiting to be listed: open (h), or to be
// opened from its parent's handle.
type walkDir struct {
	h      *dirHandle
	parent *dirHandle
	name   string
	rel    string
	ign    *ignoreSet
}

// walkFiles calls visit for every file below the directory base
// (workspace-relative, cleaned and resolved), in no particular order.
// visit runs on the walking goroutine; it may hand the file to another
// goroutine, which then calls done.
func walkFiles(ctx context.Context, env Env, base string, visit func(walkFile) error) (walkStats, error) {
	var st walkStats
	start, err := env.Root.OpenRoot(base)
	if err != nil {
		return st, err
	}
	first := &dirHandle{root: start}
	first.acquire()
	stack := []walkDir{{h: first, name: ".", rel: base, ign: baseIgnores(env, base)}}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			drain(stack)
			return st, err
		}
		wd := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		cur := wd.h
		if cur == nil {
			r, err := wd.parent.root.OpenRoot(wd.name)
			wd.parent.release()
			if err != nil {
				continue // gone, or not readable: skipped
			}
			cur = &dirHandle{root: r}
			cur.acquire()
		}
		ents, err := readDir(cur.root)
		if err != nil {
			cur.release()
			continue
		}
		ign := wd.ign
		for _, e := range ents {
			if e.name == ".gitignore" && e.typ.IsRegular() {
				if data, ok := readIgnoreFile(cur.root, ".gitignore"); ok {
					ign = ign.with(parseIgnore(data, relBase(wd.rel)))
				}
			}
		}
		for _, e := range ents {
			st.entries++
			if st.entries > maxWalkEntries {
				st.stopped = true
				cur.release()
				drain(stack)
				return st, nil
			}
			name := e.name
			if name == ".git" {
				continue
			}
			rel := joinRel(wd.rel, name)
			switch t := e.typ; {
			case t.IsDir():
				if !ign.ignored(rel, true) {
					cur.acquire()
					stack = append(stack, walkDir{parent: cur, name: name, rel: rel, ign: ign})
				}
			case t.IsRegular():
				if !ign.ignored(rel, false) {
					cur.acquire()
					if err := visit(walkFile{rel: rel, name: name, dir: cur}); err != nil {
						cur.release()
						drain(stack)
						return st, err
					}
				}
			case t&fs.ModeSymlink != 0:
				// Followed only to a regular file inside the workspace.
				fi, err := env.Root.Stat(rel)
				if err == nil && fi.Mode().IsRegular() && !ign.ignored(rel, false) {
					cur.acquire()
					if err := visit(walkFile{rel: rel, name: name, dir: cur, link: true}); err != nil {
						cur.release()
						drain(stack)
						return st, err
					}
				}
			}
		}
		cur.release()
	}
	return st, nil
}

// drain releases the handles held by directories not yet listed.
func drain(stack []walkDir) {
	for _, wd := range stack {
		if wd.h != nil {
			wd.h.release()
		} else {
			wd.parent.release()
		}
	}
}

// dirent is a directory entry: its name and type (fs.ModeDir,
// fs.ModeSymlink, 0 for a regular file, fs.ModeIrregular for others).
type dirent struct {
	name string
	typ  fs.FileMode
}

func readDir(r *os.Root) ([]dirent, error) {
	d, err := r.OpenFile(".", os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return readDirents(d, r)
}

// baseIgnores returns the rules in force in base from the .gitignore
// files of the directories above it (base's own is read by the walk)
// and .git/info/exclude.
func baseIgnores(env Env, base string) *ignoreSet {
	var set *ignoreSet
	if data, ok := readIgnoreFile(env.Root, ".git/info/exclude"); ok {
		set = set.with(parseIgnore(data, ""))
	}
	if base == "." {
		return set
	}
	parts := strings.Split(base, "/")
	for i := range parts {
		dir := strings.Join(parts[:i], "/")
		if data, ok := readIgnoreFile(env.Root, path.Join(dir, ".gitignore")); ok {
			set = set.with(parseIgnore(data, dir))
		}
	}
	return set
}

// readIgnoreFile reads an ignore file if it is a regular file of at
// most maxIgnoreBytes.
func readIgnoreFile(r *os.Root, name string) ([]byte, bool) {
	fi, err := r.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxIgnoreBytes {
		return nil, false
	}
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b := make([]byte, fi.Size())
	n, _ := f.Read(b)
	return b[:n], true
}

// relBase is a directory's path as an ignore rule base ("" for the root).
func relBase(rel string) string {
	if rel == "." {
		return ""
	}
	return rel
}

func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}
