package editor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/editor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var both = editor.Caps{ReadTextFile: true, WriteTextFile: true}

// serve answers the attachment's requests with answer until it is
// detached; it returns a channel closed when it stopped.
func serve(b *editor.Broker, a *editor.Attachment, answer func(editor.Request) (string, string)) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-a.Done():
				return
			case q := <-a.Requests():
				content, msg := answer(q)
				_ = b.Answer(a.SessionID, q.ID, content, msg)
			}
		}
	}()
	return done
}

func TestReadAndWriteReachTheAttachedEditor(t *testing.T) {
	b := editor.New(time.Minute)
	a := b.Attach("ses_1", both)
	var wrote editor.Request
	done := serve(b, a, func(q editor.Request) (string, string) {
		if q.Method == editor.MethodWriteTextFile {
			wrote = q
			return "", ""
		}
		return "buffer of " + q.Path, ""
	})
	got, err := b.ReadTextFile(context.Background(), "ses_1", "tu_1", "/ws/a.go")
	if err != nil || got != "buffer of /ws/a.go" {
		t.Fatalf("read = %q, %v", got, err)
	}
	if err := b.WriteTextFile(context.Background(), "ses_1", "tu_2", "/ws/b.go", "new"); err != nil {
		t.Fatal(err)
	}
	if wrote.Path != "/ws/b.go" || wrote.Content != "new" || wrote.ToolUseID != "tu_2" {
		t.Fatalf("write request = %+v", wrote)
	}
	a.Detach()
	<-done
}

func TestNoEditorAndOtherSessionsFailWithErrNoEditor(t *testing.T) {
	b := editor.New(time.Minute)
	a := b.Attach("ses_1", editor.Caps{ReadTextFile: true})
	defer a.Detach()
	if _, err := b.ReadTextFile(context.Background(), "ses_2", "", "/x"); !errors.Is(err, editor.ErrNoEditor) {
		t.Fatalf("another session: %v", err)
	}
	// Offered read only: a write finds no editor.
	if err := b.WriteTextFile(context.Background(), "ses_1", "", "/x", ""); !errors.Is(err, editor.ErrNoEditor) {
		t.Fatalf("write to a read-only editor: %v", err)
	}
	if c := b.Offers("ses_1"); !c.ReadTextFile || c.WriteTextFile {
		t.Fatalf("Offers = %+v", c)
	}
}

func TestARequestNobodyAnswersTimesOut(t *testing.T) {
	b := editor.New(50 * time.Millisecond)
	a := b.Attach("ses_1", both)
	defer a.Detach()
	_, err := b.ReadTextFile(context.Background(), "ses_1", "", "/x")
	if !errors.Is(err, editor.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	q := <-a.Requests()
	// A late answer is refused: nobody waits for it.
	if err := b.Answer("ses_1", q.ID, "late", ""); !errors.Is(err, editor.ErrNoRequest) {
		t.Fatalf("late answer: %v", err)
	}
}

func TestARequestEndsWithItsContext(t *testing.T) {
	b := editor.New(time.Hour)
	a := b.Attach("ses_1", both)
	defer a.Detach()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-a.Requests()
		cancel()
	}()
	if _, err := b.ReadTextFile(ctx, "ses_1", "", "/x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestDetachFailsTheRequestsWaiting(t *testing.T) {
	b := editor.New(time.Hour)
	a := b.Attach("ses_1", both)
	go func() {
		<-a.Requests()
		a.Detach()
	}()
	if err := b.WriteTextFile(context.Background(), "ses_1", "", "/x", "c"); !errors.Is(err, editor.ErrGone) {
		t.Fatalf("err = %v, want ErrGone", err)
	}
	if b.Attached("ses_1") != 0 {
		t.Fatal("the attachment is still held")
	}
	if _, err := b.ReadTextFile(context.Background(), "ses_1", "", "/x"); !errors.Is(err, editor.ErrNoEditor) {
		t.Fatalf("after detach: %v", err)
	}
}

func TestTheNewestAttachmentServes(t *testing.T) {
	b := editor.New(time.Minute)
	old := b.Attach("ses_1", both)
	oldDone := serve(b, old, func(editor.Request) (string, string) { return "old", "" })
	latest := b.Attach("ses_1", both)
	latestDone := serve(b, latest, func(editor.Request) (string, string) { return "new", "" })
	if got, _ := b.ReadTextFile(context.Background(), "ses_1", "", "/x"); got != "new" {
		t.Fatalf("read served by %q, want the newest", got)
	}
	latest.Detach()
	<-latestDone
	if got, _ := b.ReadTextFile(context.Background(), "ses_1", "", "/x"); got != "old" {
		t.Fatalf("after the newest left, read served by %q", got)
	}
	old.Detach()
	<-oldDone
}

func TestAnEditorRefusalIsAnAnswerError(t *testing.T) {
	b := editor.New(time.Minute)
	a := b.Attach("ses_1", both)
	done := serve(b, a, func(editor.Request) (string, string) { return "", "not in the project" })
	_, err := b.ReadTextFile(context.Background(), "ses_1", "", "/x")
	var ae *editor.AnswerError
	if !errors.As(err, &ae) || ae.Message != "not in the project" {
		t.Fatalf("err = %v", err)
	}
	a.Detach()
	<-done
}

func TestAFullQueueFailsAtOnce(t *testing.T) {
	b := editor.New(time.Hour)
	a := b.Attach("ses_1", both)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, editor.QueueSize)
	for range editor.QueueSize {
		go func() {
			_, err := b.ReadTextFile(ctx, "ses_1", "", "/x")
			errs <- err
		}()
	}
	for len(a.Requests()) < editor.QueueSize {
		time.Sleep(time.Millisecond)
	}
	if _, err := b.ReadTextFile(context.Background(), "ses_1", "", "/x"); !errors.Is(err, editor.ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
	cancel()
	for range editor.QueueSize {
		<-errs
	}
	a.Detach()
}
