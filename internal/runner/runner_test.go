package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
)

// log records the order in which jobs finished.
type log struct {
	mu    sync.Mutex
	lines []string
}

func (l *log) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A job waits for its stop and drains; stage 1 is stopped only once every job of stage 0 has returned.
func TestStagesStopInOrder(t *testing.T) {
	var l log
	r := New(quiet())
	started := make(chan struct{}, 3)
	job := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			started <- struct{}{}
			<-ctx.Done()
			l.add(name)
			return nil
		}
	}
	r.Go(1, "recorder", job("recorder"))
	r.Go(0, "http", job("http"))
	r.Go(0, "dispatcher", job("dispatcher"))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	for range 3 {
		<-started
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(l.lines) != 3 || l.lines[2] != "recorder" || !slices.Contains(l.lines[:2], "http") {
		t.Errorf("stopped in order %v, want stage 0 (http, dispatcher) before the recorder", l.lines)
	}
}

// A job that fails stops the others, and Run reports it by name; a job that simply ends does not.
func TestAFailureStopsEveryJob(t *testing.T) {
	r := New(quiet())
	boom := errors.New("listen: address in use")
	r.Go(0, "http", func(context.Context) error { return boom })
	r.Go(0, "one-shot", func(context.Context) error { return nil })
	stopped := make(chan struct{})
	r.Go(1, "recorder", func(ctx context.Context) error { <-ctx.Done(); close(stopped); return nil })
	err := r.Run(context.Background())
	if !errors.Is(err, boom) || err.Error() != "http: listen: address in use" {
		t.Errorf("Run = %v", err)
	}
	select {
	case <-stopped:
	default:
		t.Error("the other jobs were not stopped")
	}
}
