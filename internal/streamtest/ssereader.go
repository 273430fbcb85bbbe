package streamtest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// The parts of a text/event-stream (the HTML standard's "server-sent
// events" format) a record can be.
const (
	recEvent   = iota // a dispatched event (a block with data)
	recComment        // a line starting with ':'
	recRetry          // a valid retry: field
)

// sseRecord is one thing the reader found.
type sseRecord struct {
	kind int
	// Event: its type ("message" unless an event: field named one), its
	// data (the data: lines joined with '\n'), and the stream's last
	// event id after it (which persists from event to event), with
	// hasID telling whether this event's block set it.
	typ   string
	data  string
	id    string
	hasID bool
	// Comment: the text after the ':' (one leading space dropped).
	comment string
	// Retry: the reconnection time in milliseconds.
	retry int
}

// maxSSELine bounds one line (a snapshot's data: line can be large).
const maxSSELine = 64 << 20

var errLineTooLong = errors.New("sse: line longer than 64 MiB")

// sseReader parses a text/event-stream as the HTML standard's event
// stream interpretation does: lines end with CRLF, LF or CR; a leading
// byte-order mark is dropped; a blank line dispatches the block; an
// incomplete block at the end of the stream is discarded.
type sseReader struct {
	r      *bufio.Reader
	line   []byte
	skipLF bool // the last line ended with CR: a LF right after it is part of its end
	bom    bool // the start of the stream was checked for a BOM

	// The block being read.
	data   bytes.Buffer
	typ    string
	hasID  bool
	lastID string
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReader(r)}
}

// next returns the next record, or the read error (io.EOF at the end of
// the stream).
func (p *sseReader) next() (sseRecord, error) {
	for {
		line, err := p.readLine()
		if err != nil {
			return sseRecord{}, err
		}
		if len(line) == 0 {
			if rec, ok := p.dispatch(); ok {
				return rec, nil
			}
			continue
		}
		if line[0] == ':' {
			return sseRecord{kind: recComment, comment: string(dropSpace(line[1:]))}, nil
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], dropSpace(line[i+1:])
		}
		switch string(field) {
		case "event":
			p.typ = string(value)
		case "data":
			p.data.Write(value)
			p.data.WriteByte('\n')
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				p.lastID, p.hasID = string(value), true
			}
		case "retry":
			if n, ok := digits(value); ok {
				return sseRecord{kind: recRetry, retry: n}, nil
			}
		}
	}
}

// dispatch ends a block: an event if it had data.
func (p *sseReader) dispatch() (sseRecord, bool) {
	defer func() { p.data.Reset(); p.typ, p.hasID = "", false }()
	if p.data.Len() == 0 {
		return sseRecord{}, false
	}
	typ := p.typ
	if typ == "" {
		typ = "message"
	}
	data := p.data.Bytes()
	return sseRecord{kind: recEvent, typ: typ, data: string(data[:len(data)-1]), id: p.lastID, hasID: p.hasID}, true
}

// readLine returns the next line without its end. The line is valid
// until the next call. It never waits for more input once a line has
// ended (a CR may or may not be followed by a LF).
func (p *sseReader) readLine() ([]byte, error) {
	p.line = p.line[:0]
	if !p.bom {
		p.bom = true
		if b, err := p.r.Peek(1); err == nil && b[0] == 0xEF {
			if b, err := p.r.Peek(3); err == nil && string(b) == "\ufeff" {
				_, _ = p.r.Discard(3)
			}
		}
	}
	for {
		if p.skipLF {
			b, err := p.r.Peek(1)
			if err != nil {
				return nil, err
			}
			if b[0] == '\n' {
				_, _ = p.r.Discard(1)
			}
			p.skipLF = false
		}
		if p.r.Buffered() == 0 {
			if _, err := p.r.Peek(1); err != nil {
				return nil, err // at EOF, an unterminated line is dropped
			}
		}
		chunk, _ := p.r.Peek(p.r.Buffered())
		i := bytes.IndexAny(chunk, "\r\n")
		if i < 0 {
			if len(p.line)+len(chunk) > maxSSELine {
				return nil, errLineTooLong
			}
			p.line = append(p.line, chunk...)
			_, _ = p.r.Discard(len(chunk))
			continue
		}
		if len(p.line)+i > maxSSELine {
			return nil, errLineTooLong
		}
		p.line = append(p.line, chunk[:i]...)
		p.skipLF = chunk[i] == '\r'
		_, _ = p.r.Discard(i + 1)
		return p.line, nil
	}
}

// dropSpace drops one leading space.
func dropSpace(b []byte) []byte {
	if len(b) > 0 && b[0] == ' ' {
		return b[1:]
	}
	return b
}

// digits parses a retry value: ASCII digits only.
func digits(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(b))
	return n, err == nil
}
