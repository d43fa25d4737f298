package await

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps the failure instead of stopping the test.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failure = fmt.Sprintf(format, args...) }

// shortly shortens the timeout for one test.
func shortly(t *testing.T) {
	timeout = 50 * time.Millisecond
	t.Cleanup(func() { timeout = Timeout })
}

func TestUntilReturnsTheFirstAcceptedValue(t *testing.T) {
	var n atomic.Int64
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	if got := Until(t, "three", n.Load, func(v int64) bool { return v >= 3 }); got != 3 {
		t.Fatalf("Until returned %d, want 3", got)
	}
}

func TestUntilFailureNamesWhatAndTheLastObservation(t *testing.T) {
	shortly(t)
	r := &recorder{TB: t}
	Until(r, "the spool to be replayed", func() int { return 7 }, func(v int) bool { return v == 0 })
	if want := "the spool to be replayed: not within 50ms; last observed 7"; r.failure != want {
		t.Fatalf("failure %q, want %q", r.failure, want)
	}
}

func TestEqualFailureNamesTheWantedValue(t *testing.T) {
	shortly(t)
	r := &recorder{TB: t}
	Equal(r, "the status", func() string { return "pending" }, "succeeded")
	if want := `the status (want "succeeded"): not within 50ms; last observed "pending"`; r.failure != want {
		t.Fatalf("failure %q, want %q", r.failure, want)
	}
}

func TestReceive(t *testing.T) {
	ch := make(chan string, 1)
	ch <- "connected"
	if got := Receive(t, "the connection", ch); got != "connected" {
		t.Fatalf("Receive returned %q", got)
	}
	shortly(t)
	r := &recorder{TB: t}
	Receive(r, "the reconnection", ch)
	if !strings.HasPrefix(r.failure, "the reconnection: nothing received within") {
		t.Fatalf("failure %q", r.failure)
	}
}
