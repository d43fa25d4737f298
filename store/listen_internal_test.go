package store

import (
	"context"
	"slices"
	"testing"
	"time"
)

// pgxlisten waits a fixed delay between connections; the store's own backoff (100 ms doubling to 5 s, back to
// 100 ms once every channel listens) lives in its Connect.
func TestListenBackoff(t *testing.T) {
	s := &listenState{url: "postgres://127.0.0.1:1/none", channels: 2}
	ended, cancel := context.WithCancel(context.Background())
	cancel() // every attempt fails at once; only the delays matter
	var waits []time.Duration
	for range 8 {
		waits = append(waits, s.wait)
		if _, err := s.connect(ended); err == nil {
			t.Fatal("connected with an ended context")
		}
	}
	want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits before the attempts: %v, want %v", waits, want)
	}

	disconnected := 0
	h := listenHandler{l: Listener{Disconnected: func() { disconnected++ }}, s: s}
	_ = h.HandleBacklog(context.Background(), "a", nil)
	if s.wait != 5*time.Second {
		t.Errorf("the backoff was reset with one of two channels listening (%v)", s.wait)
	}
	_ = h.HandleBacklog(context.Background(), "b", nil)
	if s.wait != listenBackoffMin {
		t.Errorf("the backoff is %v once every channel listens, want %v", s.wait, listenBackoffMin)
	}
	s.lost(context.Background(), nil)
	if disconnected != 2 || len(s.listening) != 0 {
		t.Errorf("a lost connection told %d channels of 2 (%d still listening)", disconnected, len(s.listening))
	}
}
