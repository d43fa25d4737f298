package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/uptrace/bun"
)

// ErrTxTimeout means a transaction did not finish within the bound its context set (WithTxTimeout), its wait for
// the writer included; it was rolled back. It wraps context.DeadlineExceeded, so Unavailable reports it: the
// database is busy, trying again later helps.
var ErrTxTimeout = fmt.Errorf("store: the transaction did not finish within its time bound: %w", context.DeadlineExceeded)

// errTxInTx refuses a transaction, or a group commit, inside a transaction of the same database: on SQLite the inner
// one would wait forever for the writer the outer one holds, and on PostgreSQL it would commit apart from it.
var errTxInTx = errors.New("store: a transaction cannot begin inside another of the same database; use its tx")

// txKey marks the context a transaction hands its work (see poolGuard). There is one key per database, so that the
// transaction of one database may still write to another (a copy from SQLite to PostgreSQL).
type txKey struct{ db *DB }

type txTimeoutKey struct{}

// WithTxTimeout bounds every transaction run with ctx to d, from the moment it asks for the writer to its commit;
// past it the transaction is rolled back (the database frees its locks and, on SQLite, the single writer) and fails
// with ErrTxTimeout. The HTTP layer sets it on every request, so that no request holds the writer for longer, or
// waits for it longer, however its work goes.
func WithTxTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, TxTimeoutKey, d)
}

// TxTimeoutKey is the context key WithTxTimeout sets, for a context type of its own that answers it (its Value
// returning a time.Duration): the HTTP layer's request state does, which saves every request a context and the
// boxed duration.
var TxTimeoutKey any = txTimeoutKey{}

// txContext is the context a transaction of db runs with: bounded as WithTxTimeout asked, and marked for poolGuard.
// It refuses a transaction inside another (errTxInTx).
func (db *DB) txContext(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if ctx.Value(txKey{db}) != nil {
		return nil, nil, errTxInTx
	}
	cancel := context.CancelFunc(func() {})
	if d, ok := ctx.Value(TxTimeoutKey).(time.Duration); ok && d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	}
	return context.WithValue(ctx, txKey{db}, &txState{}), cancel, nil
}

// overBound returns err as ErrTxTimeout when the transaction's bound (tctx) ran out while the caller's own context
// (ctx) had not ended: whatever the driver made of the cancellation (a cancelled statement, a rolled-back
// transaction, a wait for a connection given up), the caller is told the database was busy.
func overBound(tctx, ctx context.Context, err error) error {
	if err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("%w: %w", ErrTxTimeout, err)
	}
	return err
}

// poolGuard watches the writer pool (w) for statements whose context carries a transaction of the same database:
// code inside RunInTx (or a group commit, or a repeatable transaction) that writes through a store method using the
// pool instead of the transaction's handle. On SQLite such a statement waits for the single writer connection that
// the transaction itself holds — the request never answers and every other write of the server waits behind it —
// and on PostgreSQL it commits apart from the transaction, so a failure later in it leaves half a change.
//
// The check runs before the statement asks for a connection, so it cannot deadlock. A test binary panics with
// the statement, so that the test running the mistake fails where it is; a server fails the statement at once
// (with a cancelled context, before it takes a connection) and logs it as the bug it is, rather than hang.
//
// It works because a transaction's own statements go through txw, which has no guard: Bun runs a query through
// the handle that made the transaction. What it cannot see is work given another context than the one the
// transaction handed to its function (the request's, from outside the closure); a test of the source tree
// (TestTransactionsUseTheirContext) keeps closures from doing that.
type poolGuard struct{ db *DB }

func (g poolGuard) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	if ctx.Value(txKey{g.db}) == nil {
		return ctx
	}
	err := fmt.Errorf("store: %q ran on the writer pool inside a transaction of the same database; "+
		"run it on the transaction's handle", e.Query)
	if testing.Testing() {
		panic(err)
	}
	slog.Default().Error("store: write outside its transaction", "error", err)
	ctx, cancel := context.WithCancelCause(ctx)
	cancel(err)
	return ctx
}

func (poolGuard) AfterQuery(context.Context, *bun.QueryEvent) {}
