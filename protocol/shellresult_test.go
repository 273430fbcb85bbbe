package protocol_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/metis-agent/metis/protocol"
)

func TestParseShellResult(t *testing.T) {
	for _, c := range []struct {
		name string
		text string
		want protocol.ShellResult
		ok   bool
	}{
		{"both streams", "exit code: 3\nstdout:\nout\nstderr:\nerr\n", protocol.ShellResult{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"}, true},
		{"no output", "exit code: 0\nstdout:\nstderr:\n", protocol.ShellResult{}, true},
		{"a note", "exit code: 0\nnote: kept open\nstdout:\nx\nstderr:\n", protocol.ShellResult{Notes: []string{"kept open"}, Stdout: "x\n"}, true},
		{"negative code", "exit code: -1\nstdout:\nstderr:\nkilled\n", protocol.ShellResult{ExitCode: -1, Stderr: "killed\n"}, true},
		{"truncated", "exit code: 0\nstdout:\naaa\n[stdout truncated: 9 more bytes not shown]\nstderr:\n",
			protocol.ShellResult{Stdout: "aaa\n[stdout truncated: 9 more bytes not shown]\n"}, true},
		{"stderr: mid-line is output", "exit code: 0\nstdout:\nsee stderr:\nstderr:\n", protocol.ShellResult{Stdout: "see stderr:\n"}, true},
		{"a printed stderr: line is ambiguous", "exit code: 0\nstdout:\nstderr:\nstderr:\n", protocol.ShellResult{}, false},
		{"not a shell result", "hello", protocol.ShellResult{}, false},
		{"code only", "exit code: 2", protocol.ShellResult{}, false},
		{"no sections", "exit code: 2\n", protocol.ShellResult{}, false},
		{"no stderr section", "exit code: 2\nstdout:\nx\n", protocol.ShellResult{}, false},
		{"a code the tool never writes", "exit code: +2\nstdout:\nstderr:\n", protocol.ShellResult{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := protocol.ParseShellResult(c.text)
			if ok != c.ok || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseShellResult(%q) = %#v, %v; want %#v, %v", c.text, got, ok, c.want, c.ok)
			}
			if ok && got.String() != c.text {
				t.Fatalf("String() = %q, want the text parsed, %q", got.String(), c.text)
			}
		})
	}
}

func TestShellExitCode(t *testing.T) {
	for text, want := range map[string]int{"exit code: 0\n": 0, "exit code: 137\nstdout:\n": 137, "exit code: -1\n": -1} {
		if got, ok := protocol.ShellExitCode(text); !ok || got != want {
			t.Errorf("ShellExitCode(%q) = %d, %v; want %d", text, got, ok, want)
		}
	}
	for _, text := range []string{"", "exit code: 0", "exit code: x\n", "exit code: 03\n", "Exit code: 1\n", " exit code: 1\n"} {
		if _, ok := protocol.ShellExitCode(text); ok {
			t.Errorf("ShellExitCode(%q) read a code", text)
		}
	}
}

// FuzzParseShellResult: any text (a stored result is whatever the
// server wrote, or a hostile server's bytes) is read without panic, and
// a text read as a result is the text of what was read (but for the
// newline String ends stderr with), so the split loses and invents
// nothing.
func FuzzParseShellResult(f *testing.F) {
	for _, s := range []string{"exit code: 0\nstdout:\nstderr:\n", "exit code: 1\nnote: n\nstdout:\na\nstderr:\nb\n", "exit code: 0\nstdout:\nstderr:\nstderr:\n", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, ok := protocol.ParseShellResult(text)
		code, codeOK := protocol.ShellExitCode(text)
		if ok && (!codeOK || code != r.ExitCode) {
			t.Fatalf("parsed %q with code %d, but ShellExitCode says %d, %v", text, r.ExitCode, code, codeOK)
		}
		if !ok {
			return
		}
		// String ends a stream in a newline, as the tool does; nothing
		// else may differ.
		want := text
		if r.Stderr != "" && !strings.HasSuffix(r.Stderr, "\n") {
			want += "\n"
		}
		if got := r.String(); got != want {
			t.Fatalf("String() = %q of %q", got, text)
		}
		if want == text {
			if again, ok := protocol.ParseShellResult(r.String()); !ok || !reflect.DeepEqual(again, r) {
				t.Fatalf("the text of %#v reads as %#v, %v", r, again, ok)
			}
		}
	})
}

func ExampleParseShellResult() {
	r, ok := protocol.ParseShellResult("exit code: 1\nstdout:\nbuilding\nstderr:\nmain.go:3: undefined: x\n")
	fmt.Println(ok, r.ExitCode)
	fmt.Printf("stdout %q\nstderr %q\n", r.Stdout, r.Stderr)
	// Output:
	// true 1
	// stdout "building\n"
	// stderr "main.go:3: undefined: x\n"
}
