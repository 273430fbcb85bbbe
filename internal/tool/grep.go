package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp/syntax"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/metis-agent/metis/internal/model"
)

// Limits of grep.
const (
	// MaxGrepLines is the most matching lines grep shows; it still
	// counts the rest.
	MaxGrepLines = 500
	// MaxGrepBytes bounds grep's output.
	MaxGrepBytes = 64 << 10
	// MaxGrepContext is the most context lines around a match.
	MaxGrepContext = 20
	// maxGrepFileBytes: larger files are skipped (and counted).
	maxGrepFileBytes = 64 << 20
	// grepLineBytes: longer lines are cut in the output.
	grepLineBytes = 500
)

// Grep searches the contents of workspace files (grep).
type Grep struct{}

// Spec implements Tool.
func (Grep) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "grep",
		Description: "Search the contents of the workspace's files with a regular expression (RE2 syntax: no lookaround or backreferences). " +
			"Prints path:line:text for each matching line, the most recently modified files first; with context, the lines around each match as path-line-text, groups separated by --. " +
			"Files that .gitignore ignores, .git and binary files are skipped. At most 500 matching lines are shown; the rest are counted.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"regular expression, matched against each line"},` +
			`"path":{"type":"string","description":"directory or file to search, relative to the workspace (default: the workspace)"},` +
			`"glob":{"type":"string","description":"only files whose path (relative to path) matches this glob; a pattern without '/' matches the file name, e.g. *.go"},` +
			`"ignore_case":{"type":"boolean","description":"match letters of either case"},` +
			`"context":{"type":"integer","minimum":0,"maximum":20,"description":"lines of context before and after each match"}},` +
			`"required":["pattern"]}`)}
}

// Kind implements Classified.
func (Grep) Kind() Kind { return KindRead }

type grepInput struct {
	Pattern    *string `json:"pattern"`
	Path       string  `json:"path"`
	Glob       string  `json:"glob"`
	IgnoreCase bool    `json:"ignore_case"`
	Context    int     `json:"context"`
}

// Targets implements Targeted: the directory or file searched.
func (Grep) Targets(input json.RawMessage) ([]string, error) { return searchTargets(input) }

// grepQuery is a checked grep input.
type grepQuery struct {
	m       *lineMatcher
	glob    string
	byName  bool // glob has no "/": matched against the file name
	context int
}

func (in *grepInput) check(env Env) (*grepQuery, error) {
	if in.Pattern == nil || *in.Pattern == "" {
		return nil, Errorf(ClassInvalidInput, "pattern is required: a regular expression")
	}
	if len(*in.Pattern) > 64<<10 {
		return nil, Errorf(ClassInvalidInput, "pattern is %d bytes; the limit is %d", len(*in.Pattern), 64<<10)
	}
	if in.Context < 0 || in.Context > MaxGrepContext {
		return nil, Errorf(ClassInvalidInput, "context is the number of lines around each match, 0 to %d; got %d", MaxGrepContext, in.Context)
	}
	m, err := newLineMatcher(*in.Pattern, in.IgnoreCase)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			return nil, Errorf(ClassInvalidInput, "the regular expression does not compile: %s (RE2 syntax: no lookaround or backreferences; escape literal ( [ { . * + ? with \\)", se.Error())
		}
		return nil, Errorf(ClassInvalidInput, "the regular expression does not compile: %v", err)
	}
	q := &grepQuery{m: m, context: in.Context}
	if in.Glob != "" {
		if q.glob, err = checkGlob(env, in.Glob, "glob"); err != nil {
			return nil, err
		}
		q.byName = !strings.Contains(q.glob, "/")
	}
	return q, nil
}

// fileHits is what grep found in one file.
type fileHits struct {
	path  string
	mtime time.Time
	count int          // matching lines
	shown int          // matching lines formatted in out
	out   bytes.Buffer // formatted lines, bounded
}

// grepSearcher is one worker's state.
type grepSearcher struct {
	q   *grepQuery
	buf []byte
	sc  scratch
}

// searchFile searches one file; nil if it has no match or is skipped.
func (s *grepSearcher) searchFile(env Env, f walkFile, tally *grepTally) *fileHits {
	h, st, err := f.open(env)
	f.done()
	if err != nil {
		return nil
	}
	defer h.Close()
	if st.Size() > maxGrepFileBytes {
		tally.add(&tally.large)
		return nil
	}
	n := int(st.Size()) + 1
	if cap(s.buf) < n {
		s.buf = make([]byte, n, n+n/4)
	}
	buf := s.buf[:cap(s.buf)]
	k, err := io.ReadFull(h, buf[:n])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil
	}
	buf = buf[:k]
	if k == n { // grew since the stat: searched up to its size then
		buf = buf[:n-1]
	}
	if bytes.IndexByte(buf, 0) >= 0 {
		tally.add(&tally.binary)
		return nil
	}
	return s.search(buf, f.rel, st.ModTime())
}

// search finds the matching lines of buf (the content of rel).
func (s *grepSearcher) search(buf []byte, rel string, mtime time.Time) *fileHits {
	var hits *fileHits
	line, counted := 1, 0 // line number at offset counted
	lastShown := 0        // last line number written (match or context)
	s.q.m.each(buf, &s.sc, func(start, end int) bool {
		line += bytes.Count(buf[counted:start], []byte{'\n'})
		counted = start
		if hits == nil {
			hits = &fileHits{path: rel, mtime: mtime}
		}
		hits.count++
		if hits.shown >= MaxGrepLines || hits.out.Len() >= MaxGrepBytes {
			return true // counted, not shown
		}
		hits.shown++
		if c := s.q.context; c > 0 {
			// Lines before, not already written.
			first := max(line-c, lastShown+1, 1)
			if lastShown > 0 && first > lastShown+1 {
				hits.out.WriteString("--\n")
			}
			ls := start
			for range line - first {
				ls = bytes.LastIndexByte(buf[:ls-1], '\n') + 1
			}
			for n := first; n < line; n++ {
				le := lineEnd(buf, ls)
				writeGrepLine(&hits.out, rel, n, '-', buf[ls:le])
				ls = le + 1
			}
		}
		writeGrepLine(&hits.out, rel, line, ':', buf[start:end])
		lastShown = line
		if c := s.q.context; c > 0 {
			// Lines after, up to the next match (which writes its own).
			ls, n := end+1, line+1
			for ; n <= line+c && ls < len(buf); n++ {
				le := lineEnd(buf, ls)
				if s.q.m.matchLine(buf[ls:le]) {
					break
				}
				writeGrepLine(&hits.out, rel, n, '-', buf[ls:le])
				lastShown = n
				ls = le + 1
			}
		}
		return true
	})
	return hits
}

// writeGrepLine writes "path<sep>n<sep>text", the text cut if long.
func writeGrepLine(out *bytes.Buffer, rel string, n int, sep byte, text []byte) {
	text = bytes.TrimSuffix(text, []byte{'\r'})
	out.WriteString(rel)
	out.WriteByte(sep)
	out.WriteString(strconv.Itoa(n))
	out.WriteByte(sep)
	if len(text) > grepLineBytes {
		cut := grepLineBytes
		for cut > 0 && text[cut]&0xC0 == 0x80 {
			cut--
		}
		out.Write(text[:cut])
		out.WriteString("…")
	} else {
		out.Write(text)
	}
	out.WriteByte('\n')
}

// grepTally counts what a search skipped, across workers.
type grepTally struct {
	mu            sync.Mutex
	binary, large int
}

func (t *grepTally) add(n *int) {
	t.mu.Lock()
	*n++
	t.mu.Unlock()
}

// Run implements Tool.
func (Grep) Run(ctx context.Context, env Env, input json.RawMessage) (Result, error) {
	var in grepInput
	if err := decodeInput(input, &in); err != nil {
		return Result{}, err
	}
	q, err := in.check(env)
	if err != nil {
		return Result{}, err
	}
	base, fi, err := searchBase(env, in.Path, true)
	if err != nil {
		return Result{}, err
	}
	var tally grepTally
	var hits []*fileHits
	var stats walkStats
	if !fi.IsDir() {
		// One file, named: searched whatever the glob and .gitignore say.
		dir, name := path.Split(base)
		r, err := env.Root.OpenRoot(path.Clean("./" + dir))
		if err != nil {
			return Result{}, fsError("search", in.Path, err)
		}
		d := &dirHandle{root: r}
		d.acquire()
		s := &grepSearcher{q: q}
		if h := s.searchFile(env, walkFile{rel: base, name: name, dir: d}, &tally); h != nil {
			hits = append(hits, h)
		}
	} else {
		hits, stats, err = grepTree(ctx, env, base, q, &tally)
		if err != nil {
			return Result{}, err
		}
	}
	return grepResult(hits, *in.Pattern, in.Path, q.context, stats, &tally), nil
}

// grepTree searches every file below base, reading and searching them
// on all cores while the walk goes on.
func grepTree(ctx context.Context, env Env, base string, q *grepQuery, tally *grepTally) ([]*fileHits, walkStats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan walkFile, 256)
	var (
		mu   sync.Mutex
		hits []*fileHits
		wg   sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &grepSearcher{q: q}
			for f := range jobs {
				if ctx.Err() != nil {
					f.done()
					continue
				}
				if h := s.searchFile(env, f, tally); h != nil {
					mu.Lock()
					hits = append(hits, h)
					mu.Unlock()
				}
			}
		}()
	}
	stats, err := walkFiles(ctx, env, base, func(f walkFile) error {
		if q.glob != "" {
			target := relTo(base, f.rel)
			if q.byName {
				target = f.name
			}
			if ok, _ := doublestar.Match(q.glob, target); !ok {
				f.done()
				return nil
			}
		}
		select {
		case jobs <- f:
			return nil
		case <-ctx.Done():
			f.done()
			return ctx.Err()
		}
	})
	close(jobs)
	wg.Wait()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, stats, err
		}
		return nil, stats, fsError("search", base, err)
	}
	return hits, stats, nil
}

func grepResult(hits []*fileHits, pattern, where string, context int, stats walkStats, tally *grepTally) Result {
	if where == "" {
		where = "the workspace"
	}
	fs := make([]found, len(hits))
	byPath := make(map[string]*fileHits, len(hits))
	total := 0
	for i, h := range hits {
		fs[i] = found{path: h.path, mtime: h.mtime}
		byPath[h.path] = h
		total += h.count
	}
	newestFirst(fs)
	var out bytes.Buffer
	shown, shownFiles := 0, 0
	for _, f := range fs {
		h := byPath[f.path]
		if shown >= MaxGrepLines || out.Len() >= MaxGrepBytes {
			break
		}
		if context > 0 && shownFiles > 0 {
			out.WriteString("--\n")
		}
		// Whole lines only, within both bounds.
		b := h.out.Bytes()
		for len(b) > 0 && shown < MaxGrepLines {
			i := bytes.IndexByte(b, '\n')
			l := b[:i+1]
			if out.Len()+len(l) > MaxGrepBytes {
				break
			}
			if isMatchLine(l, h.path) {
				shown++
			}
			out.Write(l)
			b = b[i+1:]
		}
		shownFiles++
	}
	if shown < total {
		fmt.Fprintf(&out, "[%s in %s; the first %d, of the most recently changed files, are shown. Narrow the pattern, path or glob to see the rest]\n",
			count(total, "matching line"), count(len(hits), "file"), shown)
	}
	if tally.large > 0 {
		fmt.Fprintf(&out, "[%d files over %d MiB were not searched]\n", tally.large, maxGrepFileBytes>>20)
	}
	if stats.stopped {
		fmt.Fprintf(&out, "[the search stopped after %d entries: give a narrower path]\n", maxWalkEntries)
	}
	sum := fmt.Sprintf("%s in %s", count(total, "matching line"), count(len(hits), "file"))
	if total == 0 {
		return Result{Content: fmt.Sprintf("no matches for %s in %s\n", pattern, where) + out.String(), Summary: sum}
	}
	return Result{Content: out.String(), Summary: sum}
}

// isMatchLine tells a "path:n:text" line from a context line.
func isMatchLine(l []byte, rel string) bool {
	return len(l) > len(rel) && l[len(rel)] == ':'
}
