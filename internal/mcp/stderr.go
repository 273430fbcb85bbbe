package mcp

import (
	"bufio"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Bounds of a stdio server's stderr in metis's log: at most
// stderrBurst lines per stderrWindow (the others are counted, and the
// count logged when the next window opens), each cut to stderrLineBytes.
// The last stderrTail lines are kept for the error of a failed start.
const (
	stderrBurst     = 50
	stderrWindow    = 10 * time.Second
	stderrLineBytes = 2048
	stderrTail      = 8
	stderrTailBytes = 256
)

// stderrLog copies a server's stderr to the log, bounded.
type stderrLog struct {
	r    io.ReadCloser
	log  *slog.Logger
	done chan struct{}

	mu   sync.Mutex
	tail []string
}

func newStderrLog(r io.ReadCloser, log *slog.Logger) *stderrLog {
	s := &stderrLog{r: r, log: log, done: make(chan struct{})}
	go s.run()
	return s
}

func (s *stderrLog) run() {
	defer close(s.done)
	br := bufio.NewReaderSize(s.r, 4096)
	windowStart, logged, dropped := time.Now(), 0, 0
	for {
		line, err := readLine(br, stderrLineBytes)
		if line != "" {
			s.keep(line)
			now := time.Now()
			if now.Sub(windowStart) >= stderrWindow {
				if dropped > 0 {
					s.log.Warn("mcp server stderr: lines not logged (too many)", "lines", dropped)
				}
				windowStart, logged, dropped = now, 0, 0
			}
			if logged < stderrBurst {
				logged++
				s.log.Info("mcp server stderr", "line", line)
			} else {
				dropped++
			}
		}
		if err != nil {
			if dropped > 0 {
				s.log.Warn("mcp server stderr: lines not logged (too many)", "lines", dropped)
			}
			return
		}
	}
}

// readLine reads one line, cut to limit bytes (the rest of it is
// skipped), without its line end, as valid UTF-8.
func readLine(br *bufio.Reader, limit int) (string, error) {
	var b strings.Builder
	for {
		frag, err := br.ReadSlice('\n')
		if room := limit - b.Len(); room > 0 {
			if len(frag) > room {
				frag = frag[:room]
			}
			b.Write(frag)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line := strings.TrimRight(b.String(), "\r\n")
		return strings.ToValidUTF8(line, "\uFFFD"), err
	}
}

func (s *stderrLog) keep(line string) {
	if len(line) > stderrTailBytes {
		n := stderrTailBytes
		for n > 0 && !utf8.RuneStart(line[n]) {
			n--
		}
		line = line[:n] + "…"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tail = append(s.tail, line)
	if len(s.tail) > stderrTail {
		s.tail = s.tail[len(s.tail)-stderrTail:]
	}
}

// last returns the last lines the server wrote to stderr, joined.
func (s *stderrLog) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.tail, " | ")
}

// close stops reading (a child of the server that escaped its group
// may hold the pipe open) and waits for the copier.
func (s *stderrLog) close() {
	_ = s.r.Close()
	<-s.done
}
