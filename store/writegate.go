package store

import (
	"context"
	"sync"
)

// writeGate hands SQLite's single writer to the transactions waiting for it in the order they came. The writer is
// a pool of one connection, and database/sql gives a freed connection to a random waiter: with a few busy callers
// (shared transactions, a queue's claims and records, a dispatcher) always waiting, a transaction could lose that
// draw many times in a row, and a quiet caller's small transaction waited seconds behind large ones that came after
// it. In arrival order, a transaction waits for those ahead of it only.
type writeGate struct {
	mu      sync.Mutex
	held    bool
	waiting []chan struct{}
}

// lock takes the gate, or returns ctx's error when ctx ends first (the gate is then not held).
func (g *writeGate) lock(ctx context.Context) error {
	g.mu.Lock()
	if !g.held {
		g.held = true
		g.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	g.waiting = append(g.waiting, turn)
	g.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		for i, c := range g.waiting {
			if c == turn {
				g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
				g.mu.Unlock()
				return ctx.Err()
			}
		}
		g.mu.Unlock()
		// Handed over meanwhile: pass it on.
		g.unlock()
		return ctx.Err()
	}
}

// unlock hands the gate to the first waiter, or frees it.
func (g *writeGate) unlock() {
	g.mu.Lock()
	if len(g.waiting) > 0 {
		next := g.waiting[0]
		g.waiting = g.waiting[1:]
		g.mu.Unlock()
		close(next)
		return
	}
	g.held = false
	g.mu.Unlock()
}
