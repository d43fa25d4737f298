package store

import (
	"context"
	"testing"
	"time"
)

// The writer goes to the transactions waiting for it in the order they came, and one that gives up its wait
// neither holds the gate nor keeps the next from it.
func TestWriteGateInArrivalOrder(t *testing.T) {
	var g writeGate
	if err := g.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 8)
	for i := range 5 {
		go func() {
			if err := g.lock(context.Background()); err != nil {
				t.Error(err)
				return
			}
			order <- i
			g.unlock()
		}()
		for { // each waiter queued before the next starts
			g.mu.Lock()
			n := len(g.waiting)
			g.mu.Unlock()
			if n == i+1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() { gaveUp <- g.lock(ctx) }()
	for {
		g.mu.Lock()
		n := len(g.waiting)
		g.mu.Unlock()
		if n == 6 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("a canceled wait took the gate")
	}
	g.unlock()
	for want := range 5 {
		if got := <-order; got != want {
			t.Fatalf("waiter %d took the writer %dth", got, want)
		}
	}
	if err := g.lock(context.Background()); err != nil || !g.held {
		t.Fatalf("the gate is not free after the waiters: %v", err)
	}
}
