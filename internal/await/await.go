// Package await is how tests wait for something another goroutine or process does: they observe it until it holds
// instead of sleeping a fixed time and hoping. A wait that succeeds returns as soon as its condition holds; one that
// fails stops the test after Timeout, naming what it waited for and the last value it observed.
package await

import (
	"fmt"
	"testing"
	"time"
)

// Timeout is how long a wait lasts before it fails the test. It is generous because only a failing test pays it,
// and the suite runs on loaded machines (the race detector, two database dialects, processes started by tests).
const Timeout = 30 * time.Second

// interval is how often a condition is observed again.
const interval = 10 * time.Millisecond

// timeout is Timeout, shortened by this package's own tests to watch waits fail.
var timeout = Timeout

// Until observes a value every 10 ms until done accepts it, and returns that value. After Timeout it fails t with
// what (the thing awaited, e.g. "the spool to be replayed") and the last value observed. observe and done run on the
// caller's goroutine, so they may fail t themselves.
func Until[T any](t testing.TB, what string, observe func() T, done func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := observe()
		if done(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last observed %s", what, timeout, show(v))
			return v
		}
		time.Sleep(interval)
	}
}

// Equal is Until the observed value equals want.
func Equal[T comparable](t testing.TB, what string, observe func() T, want T) T {
	t.Helper()
	return Until(t, what+" (want "+show(want)+")", observe, func(v T) bool { return v == want })
}

// Receive waits for a value on ch and returns it; after Timeout it fails t with what.
func Receive[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing received within %v", what, timeout)
		var zero T
		return zero
	}
}

// show formats an observed value for a failure message: strings quoted (an empty one is visible), the rest with
// field names.
func show(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%+v", v)
}
