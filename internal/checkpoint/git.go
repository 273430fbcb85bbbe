package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// MinGitVersion is the oldest git the snapshots are made with (the
// plumbing used here is much older; this is the oldest checked).
var MinGitVersion = [2]int{2, 20}

// gitConfig is passed with -c to every git command: whatever the
// repository's configuration says, no hook, filter, fsmonitor or
// end-of-line conversion runs, symlinks and executable bits are
// recorded, and git never collects garbage on its own (GC does).
var gitConfig = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.autocrlf=false",
	"core.safecrlf=false",
	"core.symlinks=true",
	"core.fileMode=true",
	"core.ignoreCase=false",
	"core.precomposeUnicode=false",
	"core.quotePath=false",
	"core.longpaths=true",
	"core.untrackedCache=false",
	"core.splitIndex=false",
	"core.sparseCheckout=false",
	"core.excludesFile=",
	"core.attributesFile=",
	"gc.auto=0",
	"maintenance.auto=false",
	"commit.gpgSign=false",
	"safe.directory=*",
	"diff.noprefix=false",
	"diff.mnemonicPrefix=false",
	"diff.renames=false",
	"diff.external=",
	"color.ui=false",
	"index.skipHash=false",
	"feature.manyFiles=false",
}

// gitAttributes is the git directory's info/attributes, which takes
// precedence over every .gitattributes of the workspace: no
// end-of-line conversion, no clean or smudge filter, no $Id$
// expansion, no re-encoding. A snapshot holds the files' bytes as they
// are.
const gitAttributes = "* -text -filter -ident !eol !working-tree-encoding\n"

// git runs git commands on one git directory and work tree with a
// scrubbed environment.
type git struct {
	bin     string
	dir     string // the git directory
	work    string // the work tree ("" for commands that need none)
	timeout time.Duration
}

// gitError is a git command that failed: its arguments, exit status and
// what it wrote to stderr (cut).
type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	if msg == "" {
		return fmt.Sprintf("git %s: %v", strings.Join(e.args, " "), e.err)
	}
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, msg)
}

func (e *gitError) Unwrap() error { return e.err }

// env is the whole environment of a git command: nothing of the
// server's but PATH (git finds its helpers through it).
func (g *git) env(extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + g.dir,
		"XDG_CONFIG_HOME=" + g.dir,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_AUTHOR_NAME=metis",
		"GIT_AUTHOR_EMAIL=metis@localhost",
		"GIT_COMMITTER_NAME=metis",
		"GIT_COMMITTER_EMAIL=metis@localhost",
		"GIT_DIR=" + g.dir,
	}
	if g.work != "" {
		env = append(env, "GIT_WORK_TREE="+g.work)
	}
	return append(env, extra...)
}

// run runs git with args, stdin as its input (nil for none) and returns
// its standard output. extraEnv adds variables (GIT_INDEX_FILE).
func (g *git) run(ctx context.Context, stdin []byte, extraEnv []string, args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := g.runTo(ctx, &out, stdin, extraEnv, args...)
	return out.Bytes(), err
}

// runTo is run writing the standard output to out.
func (g *git) runTo(ctx context.Context, out interface{ Write([]byte) (int, error) }, stdin []byte, extraEnv []string, args ...string) error {
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	full := make([]string, 0, 2*len(gitConfig)+len(args))
	for _, c := range gitConfig {
		full = append(full, "-c", c)
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, g.bin, full...)
	cmd.Env = g.env(extraEnv...)
	cmd.Dir = g.dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &capped{w: &stderr, n: 8 << 10}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
		return &gitError{args: args, err: err, stderr: stderr.String()}
	}
	return nil
}

// capped writes at most n bytes to w and drops the rest; truncated
// reports whether anything was dropped.
type capped struct {
	w         *bytes.Buffer
	n         int
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.n - c.w.Len()
	if room <= 0 {
		c.truncated = c.truncated || len(p) > 0
		return len(p), nil
	}
	if len(p) > room {
		c.w.Write(p[:room])
		c.truncated = true
		return len(p), nil
	}
	return c.w.Write(p)
}

// findGit returns the git binary to use (bin, else "git" on PATH) and
// its version, or an error wrapping ErrUnavailable saying what is
// missing.
func findGit(ctx context.Context, bin string) (string, string, error) {
	name := bin
	if name == "" {
		name = "git"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", "", fmt.Errorf("%w: the git binary was not found (%v); install git (Debian: apt-get install git) or set checkpoint-git", ErrUnavailable, err)
	}
	g := &git{bin: path, dir: os.TempDir(), timeout: 10 * time.Second}
	out, err := g.run(ctx, nil, nil, "version")
	if err != nil {
		return "", "", fmt.Errorf("%w: %s does not run: %v", ErrUnavailable, path, err)
	}
	v := strings.TrimSpace(string(out))
	major, minor, ok := parseGitVersion(v)
	if !ok {
		return "", "", fmt.Errorf("%w: %s answers %q, not a git version", ErrUnavailable, path, v)
	}
	if major < MinGitVersion[0] || major == MinGitVersion[0] && minor < MinGitVersion[1] {
		return "", "", fmt.Errorf("%w: %s is %s; checkpoints need git %d.%d or newer", ErrUnavailable, path, v, MinGitVersion[0], MinGitVersion[1])
	}
	return path, v, nil
}

// parseGitVersion reads "git version 2.39.5" (and vendor suffixes).
func parseGitVersion(s string) (int, int, bool) {
	rest, ok := strings.CutPrefix(s, "git version ")
	if !ok {
		return 0, 0, false
	}
	parts := strings.SplitN(rest, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return major, minor, true
}

// isExit reports whether err is git exiting with code.
func isExit(err error, code int) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}
