package token

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// FileName is the token file's name under the home directory.
const FileName = "token"

// MinLength is the shortest token accepted from a file or the
// environment; a generated token is 43 characters (32 random bytes).
const MinLength = 16

// maxFileSize bounds a token file: a token is one short line.
const maxFileSize = 4096

// Generate returns a fresh token: 32 bytes from crypto/rand, base64url.
func Generate() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Ensure reads the token at path, creating it first (mode 0600, a fresh
// token) if it does not exist. It reports whether it created the file.
func Ensure(path string) (tok string, created bool, err error) {
	tok, err = Read(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("token file %s: %w", path, err)
	}
	tok, err = Generate()
	if err != nil {
		return "", false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) { // another process created it first
		tok, err = Read(path)
		return tok, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("token file %s: %w", path, err)
	}
	_, werr := f.WriteString(tok + "\n")
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(path)
		return "", false, fmt.Errorf("token file %s: write: %w", path, err)
	}
	return tok, true, nil
}

// Read returns the token held in the file at path. The file must be a
// regular file (a symlink to one is followed) that neither group nor
// others may read, at most 4 KiB, holding one token of at least
// MinLength printable characters; surrounding whitespace is ignored. A
// FIFO or a device is refused without blocking. A missing file is an
// error wrapping fs.ErrNotExist.
func Read(path string) (string, error) {
	// O_NONBLOCK: opening a FIFO with no writer would otherwise hang.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file (%s); use a plain file with mode 0600", path, st.Mode().Type())
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("token file %s has mode %04o: group or others may read it; run chmod 600 %s", path, perm, path)
	}
	if st.Size() > maxFileSize {
		return "", fmt.Errorf("token file %s is %d bytes; a token file holds one token (at most %d bytes)", path, st.Size(), maxFileSize)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	if len(b) > maxFileSize {
		return "", fmt.Errorf("token file %s grew past %d bytes while read", path, maxFileSize)
	}
	tok, err := Parse(string(b))
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return tok, nil
}

// Parse checks a token given as text (a file's content, $METIS_TOKEN):
// surrounding whitespace is dropped; what remains must be one run of at
// least MinLength printable ASCII characters without spaces. Errors never
// quote the text.
func Parse(s string) (string, error) {
	tok := strings.TrimSpace(s)
	if tok == "" {
		return "", errors.New("the token is empty")
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return "", fmt.Errorf("the token has a space, a control or a non-ASCII character at byte %d; a token is one word of printable ASCII", i)
		}
	}
	if len(tok) < MinLength {
		return "", fmt.Errorf("the token is %d characters; use at least %d (metis generates 43)", len(tok), MinLength)
	}
	return tok, nil
}
