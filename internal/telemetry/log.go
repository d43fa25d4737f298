package telemetry

import (
	"io"
	"log/slog"
	"sync"
	"time"
)

// LogWriter buffers log lines on their way to a slow writer (stderr, a file, a pipe): an access log line per
// request written straight to stderr is a write system call per request, as many as the answers themselves. Lines
// are written whole and in order, at the latest FlushInterval after the first line of a batch, at once when a
// batch reaches its bound, and on Flush and Close: a clean exit (Close) loses no line. A crash loses the lines of
// the last interval at most.
type LogWriter struct {
	out      io.Writer
	interval time.Duration
	limit    int

	mu     sync.Mutex
	buf    []byte
	timer  *time.Timer
	armed  bool
	closed bool
	err    error
}

// Defaults of NewLogWriter.
const (
	// DefaultLogFlushInterval is how late a log line may reach the writer: short enough that someone following the
	// log sees a request at once, long enough that a busy server writes a few hundred lines in one call.
	DefaultLogFlushInterval = 50 * time.Millisecond
	// DefaultLogBuffer is the most bytes held before they are written without waiting for the interval.
	DefaultLogBuffer = 64 << 10
)

// NewLogWriter returns a LogWriter over out that flushes every interval (DefaultLogFlushInterval when not
// positive) and holds at most limit bytes (DefaultLogBuffer when not positive). Close it on exit.
func NewLogWriter(out io.Writer, interval time.Duration, limit int) *LogWriter {
	if interval <= 0 {
		interval = DefaultLogFlushInterval
	}
	if limit <= 0 {
		limit = DefaultLogBuffer
	}
	w := &LogWriter{out: out, interval: interval, limit: limit, buf: make([]byte, 0, limit)}
	w.timer = time.AfterFunc(time.Hour, func() { _ = w.Flush() })
	w.timer.Stop()
	return w
}

// Write takes one or more whole lines. After Close, lines are written through at once, so that nothing logged
// during the last moments of a shutdown is lost.
func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.out.Write(p)
	}
	if len(w.buf)+len(p) > w.limit {
		w.flushLocked()
		if len(p) > w.limit { // a line larger than the whole buffer goes out as it is
			return w.out.Write(p)
		}
	}
	w.buf = append(w.buf, p...)
	if !w.armed {
		w.armed = true
		w.timer.Reset(w.interval)
	}
	return len(p), nil
}

// Flush writes the buffered lines now and returns the first error the writer reported since the last Flush.
func (w *LogWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
	err := w.err
	w.err = nil
	return err
}

func (w *LogWriter) flushLocked() {
	if w.armed {
		w.armed = false
		w.timer.Stop()
	}
	if len(w.buf) == 0 {
		return
	}
	if _, err := w.out.Write(w.buf); err != nil && w.err == nil {
		w.err = err // a log cannot log its own failure; the lines are dropped rather than held forever
	}
	w.buf = w.buf[:0]
}

// Close flushes the buffered lines; later lines are written through unbuffered.
func (w *LogWriter) Close() error {
	err := w.Flush()
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	return err
}

// NewJSONLogger returns the process's logger: slog's JSON lines on w at level and above. Lines written by the
// access log through AccessLogWriter reach w too, whole, in the same format.
func NewJSONLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	sw := &syncWriter{w: w}
	return slog.New(&JSONHandler{Handler: slog.NewJSONHandler(sw, &slog.HandlerOptions{Level: level}), out: sw})
}

// JSONHandler is slog's JSON handler with the writer under it exposed, so that a hot path (the access log, a line
// per request) can format its lines itself — in the same format, without slog's generic work per attribute —
// and write them beside the others. Only the root handler is one: a logger derived With attributes or a group
// adds to every line, which a line formatted elsewhere would miss.
type JSONHandler struct {
	slog.Handler
	out *syncWriter
}

// AccessLogWriter returns the writer under log when log is a NewJSONLogger logger (not one derived from it), and
// false otherwise. A line written there must be one whole line in the format of slog's JSON handler; the caller
// checks log.Enabled for the line's level first.
func AccessLogWriter(log *slog.Logger) (io.Writer, bool) {
	h, ok := log.Handler().(*JSONHandler)
	if !ok {
		return nil, false
	}
	return h.out, true
}

// syncWriter serialises the writes of slog's handler and of the access log on one writer: slog's handler locks
// only among the handlers it derives.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
