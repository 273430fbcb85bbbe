package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchOptions give git time on a loaded machine: the figures are the
// medians, not the slowest run.
var benchOptions = Options{Timeout: 15 * time.Minute}

// benchFiles is the size of the benchmarks' workspace: 10,000 files in
// 100 directories, 0.5 to 4 KiB of text each (about 22 MiB).
const benchFiles = 10_000

// benchWorkspace fills ws with benchFiles source-like files.
func benchWorkspace(b *testing.B, ws string) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range benchFiles {
		dir := filepath.Join(ws, fmt.Sprintf("pkg%02d", i%100))
		if i < 100 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		n := 512 + rng.IntN(3584)
		line := fmt.Sprintf("// file %d: some source text to hash and compress\n", i)
		data := strings.Repeat(line, n/len(line)+1)[:n]
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.go", i)), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpoint measures checkpoints of a 10,000-file workspace:
// the first (every file hashed and stored), one per turn of an
// unchanged workspace, and one per turn that changed 10 files (the
// before and after snapshots of a turn cost one each). disk-B/op is
// what the git directory grows by per snapshot.
func BenchmarkCheckpoint(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		s, ws := newStore(b, benchOptions)
		benchWorkspace(b, ws)
		var disk int64
		for b.Loop() {
			b.StopTimer()
			os.RemoveAll(s.Dir(ws))
			b.StartTimer()
			snap(b, s, ws)
			b.StopTimer()
			disk += s.DiskUse(ws)
			b.StartTimer()
		}
		b.ReportMetric(float64(disk)/float64(b.N), "disk-B/op")
	})
	b.Run("unchanged", func(b *testing.B) {
		s, ws := newStore(b, benchOptions)
		benchWorkspace(b, ws)
		snap(b, s, ws)
		snap(b, s, ws) // the index's stat data settles
		start := s.DiskUse(ws)
		for b.Loop() {
			snap(b, s, ws)
		}
		b.ReportMetric(float64(s.DiskUse(ws)-start)/float64(b.N), "disk-B/op")
	})
	b.Run("10-files-changed", func(b *testing.B) {
		s, ws := newStore(b, benchOptions)
		benchWorkspace(b, ws)
		snap(b, s, ws)
		start := s.DiskUse(ws)
		i := 0
		for b.Loop() {
			b.StopTimer()
			for j := range 10 {
				k := (i*10 + j) % benchFiles
				p := filepath.Join(ws, fmt.Sprintf("pkg%02d", k%100), fmt.Sprintf("f%05d.go", k))
				f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				fmt.Fprintf(f, "// turn %d changed this\n", i)
				f.Close()
			}
			i++
			b.StartTimer()
			snap(b, s, ws)
		}
		b.ReportMetric(float64(s.DiskUse(ws)-start)/float64(b.N), "disk-B/op")
	})
}
