package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

// GroupCommit runs small write transactions of many callers as few database transactions: while one transaction
// is being written and committed, the calls that arrive wait, and go together into the next one. Each call runs in
// a savepoint of its own, so a call that fails (a duplicate key, a refused row) rolls back only its own writes and
// gets its own error; the others commit. A call returns once the transaction holding it committed (or failed), so
// "Do returned nil" means "durable", exactly as with RunInTx.
//
// It is fair: calls are taken in arrival order, at most Max a transaction. It pays where commits are the cost — the
// single writer of SQLite, and the fsync of each PostgreSQL commit — and costs two statements a call (the savepoint
// and its release) when calls do not overlap.
type GroupCommit struct {
	db    *DB
	max   int
	lanes int // transactions written at once: 1 on SQLite (one writer), a few on PostgreSQL
	// lock, when set, runs first in every shared transaction with the keys of all its calls (DoFor), sorted and
	// without repeats.
	lock func(ctx context.Context, tx bun.Tx, keys []string) error
	// hooks, when set, frame every shared transaction (see GroupHooks).
	hooks GroupHooks

	mu      sync.Mutex
	pending []*groupCall
	running int
}

type groupCall struct {
	fn   func(ctx context.Context, tx bun.Tx) error
	keys []string
	done chan error
}

// NewGroupCommit returns a group committer over db taking at most max calls a transaction (default 64). On
// PostgreSQL up to four transactions are written at once, so that statement round trips overlap with commits.
func NewGroupCommit(db *DB, max int) *GroupCommit {
	if max <= 0 {
		max = 64
	}
	lanes := 1
	if db.Dialect() == Postgres {
		lanes = 4
	}
	return &GroupCommit{db: db, max: max, lanes: lanes}
}

// NewLockingGroupCommit is NewGroupCommit whose shared transactions first run lock with the keys every call of the
// transaction named (DoFor), sorted and without repeats, before any call runs. Callers that lock rows in a
// transaction of their own take them in the same order (the rows of several callers, in key order, first), so a
// shared transaction — whose calls come in arrival order, not key order — never deadlocks with them or with
// another shared transaction.
func NewLockingGroupCommit(db *DB, max int, lock func(ctx context.Context, tx bun.Tx, keys []string) error) *GroupCommit {
	g := NewGroupCommit(db, max)
	g.lock = lock
	return g
}

// GroupHooks frame the shared transactions of a GroupCommit: what its calls leave to write once for all of them.
type GroupHooks struct {
	// Begin returns the context the calls of one shared transaction run in (it may carry what they share).
	Begin func(ctx context.Context) context.Context
	// End runs after the last call, before the commit, in the context Begin returned; an error fails every call of
	// the transaction (it is rolled back).
	End func(ctx context.Context, tx bun.Tx) error
}

// WithHooks sets the hooks of every shared transaction; call it before the first call.
func (g *GroupCommit) WithHooks(h GroupHooks) *GroupCommit {
	g.hooks = h
	return g
}

// groupTimeout bounds one shared transaction; it does not depend on any caller's context, because a caller that
// goes away must not roll back the others.
const groupTimeout = 30 * time.Second

// Do runs fn in a shared transaction and returns its error, or the transaction's when the commit failed. fn must
// not keep tx, and must leave the Go state it changes consistent when it returns an error (its writes are rolled
// back). The call waits for the commit even when ctx ends: the writes of an accepted call are not abandoned halfway.
// It refuses to run inside a transaction of the same database, whose writer the batch would wait for.
func (g *GroupCommit) Do(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	return g.DoFor(ctx, nil, fn)
}

// DoFor is Do for a call that needs the rows keys name locked (see NewLockingGroupCommit): they are locked, with
// those of the other calls, before any call of the shared transaction runs.
func (g *GroupCommit) DoFor(ctx context.Context, keys []string, fn func(ctx context.Context, tx bun.Tx) error) error {
	if ctx.Value(txKey{g.db}) != nil {
		return errTxInTx
	}
	c := &groupCall{fn: fn, keys: keys, done: make(chan error, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, c)
	if g.running < g.lanes {
		g.running++
		go g.loop()
	}
	g.mu.Unlock()
	return <-c.done
}

// loop runs batches until no call waits.
func (g *GroupCommit) loop() {
	for {
		g.mu.Lock()
		n := min(len(g.pending), g.max)
		if n == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		batch := g.pending[:n:n]
		g.pending = g.pending[n:]
		g.mu.Unlock()
		g.run(batch)
	}
}

// run writes one batch in one transaction.
func (g *GroupCommit) run(batch []*groupCall) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	errs := make([]error, len(batch))
	var keys []string
	if g.lock != nil {
		for _, c := range batch {
			keys = append(keys, c.keys...)
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
	}
	if g.hooks.Begin != nil {
		ctx = g.hooks.Begin(ctx)
	}
	err := g.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if len(keys) > 0 {
			if err := g.lock(ctx, tx, keys); err != nil {
				return err
			}
		}
		if len(batch) == 1 {
			if errs[0] = batch[0].fn(ctx, tx); errs[0] != nil {
				return errs[0]
			}
			return g.end(ctx, tx)
		}
		for i, c := range batch {
			sp := fmt.Sprintf("group_%d", i)
			if _, err := tx.ExecContext(ctx, "SAVEPOINT "+sp); err != nil {
				return err
			}
			if errs[i] = c.fn(ctx, tx); errs[i] != nil {
				if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+sp); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+sp); err != nil {
				return err
			}
		}
		return g.end(ctx, tx)
	})
	for i, c := range batch {
		if errs[i] == nil && err != nil {
			errs[i] = err
		}
		c.done <- errs[i]
	}
}

// end runs the End hook, if any, after the calls of a shared transaction.
func (g *GroupCommit) end(ctx context.Context, tx bun.Tx) error {
	if g.hooks.End == nil {
		return nil
	}
	return g.hooks.End(ctx, tx)
}
