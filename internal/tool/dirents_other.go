//go:build !linux

package tool

import "os"

// readDirents lists the directory open as d with each entry's type.
func readDirents(d *os.File, _ *os.Root) ([]dirent, error) {
	ents, err := d.ReadDir(-1)
	out := make([]dirent, 0, len(ents))
	for _, e := range ents {
		out = append(out, dirent{name: e.Name(), typ: e.Type()})
	}
	return out, err
}
