package telemetry

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *lockedBuffer) state() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String(), b.writes
}

// TestLogWriterBatchesLines: lines wait for the interval and then go out in one write, in order.
func TestLogWriterBatchesLines(t *testing.T) {
	var out lockedBuffer
	w := NewLogWriter(&out, 20*time.Millisecond, 0)
	defer w.Close()
	for _, l := range []string{"a\n", "b\n", "c\n"} {
		if n, err := w.Write([]byte(l)); n != len(l) || err != nil {
			t.Fatalf("Write: %d %v", n, err)
		}
	}
	if s, _ := out.state(); s != "" {
		t.Fatalf("written before the interval: %q", s)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, writes := out.state()
		if s == "a\nb\nc\n" {
			if writes != 1 {
				t.Errorf("%d writes, want 1", writes)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not flushed after the interval: %q", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A later line arms the timer again.
	_, _ = w.Write([]byte("d\n"))
	for s, _ := out.state(); s != "a\nb\nc\nd\n"; s, _ = out.state() {
		if time.Now().After(deadline) {
			t.Fatalf("second batch not flushed: %q", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLogWriterCloseWritesEverything: a clean exit loses no line, and lines logged after Close go straight out.
func TestLogWriterCloseWritesEverything(t *testing.T) {
	var out lockedBuffer
	w := NewLogWriter(&out, time.Hour, 0)
	_, _ = w.Write([]byte("one\n"))
	_, _ = w.Write([]byte("two\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if s, _ := out.state(); s != "one\ntwo\n" {
		t.Fatalf("after Close: %q", s)
	}
	_, _ = w.Write([]byte("late\n"))
	if s, _ := out.state(); s != "one\ntwo\nlate\n" {
		t.Fatalf("after a write past Close: %q", s)
	}
}

// TestLogWriterBound: the buffer never holds more than its limit; lines are never split.
func TestLogWriterBound(t *testing.T) {
	var out lockedBuffer
	w := NewLogWriter(&out, time.Hour, 10)
	_, _ = w.Write([]byte("123456\n")) // 7 bytes held
	_, _ = w.Write([]byte("abcdef\n")) // would pass 10: the first goes out
	if s, _ := out.state(); s != "123456\n" {
		t.Fatalf("after passing the bound: %q", s)
	}
	_, _ = w.Write([]byte("a line longer than the buffer\n"))
	if s, _ := out.state(); s != "123456\nabcdef\na line longer than the buffer\n" {
		t.Fatalf("an outsized line: %q", s)
	}
	_ = w.Close()
}

// TestAccessLogWriter: only the root logger of NewJSONLogger exposes its writer; a derived one adds attributes a
// line written there would miss.
func TestAccessLogWriter(t *testing.T) {
	var out lockedBuffer
	log := NewJSONLogger(&out, nil)
	w, ok := AccessLogWriter(log)
	if !ok {
		t.Fatal("no writer under NewJSONLogger")
	}
	log.Info("hello", "n", 1)
	_, _ = w.Write([]byte("{\"msg\":\"direct\"}\n"))
	s, _ := out.state()
	if !strings.Contains(s, `"msg":"hello","n":1`) || !strings.HasSuffix(s, "{\"msg\":\"direct\"}\n") {
		t.Errorf("log: %q", s)
	}
	if _, ok := AccessLogWriter(log.With("request_id", "x")); ok {
		t.Error("a derived logger exposes the writer")
	}
	if _, ok := AccessLogWriter(slog.New(slog.NewJSONHandler(io.Discard, nil))); ok {
		t.Error("another logger exposes a writer")
	}
}
