package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// pipelinedTx is a transaction on one PostgreSQL connection whose writes wait to be sent together: a statement
// that returns no rows is queued, and the queue goes to the server in one message (the simple protocol runs a
// string of statements in order, stopping at the first error) before the next read, or with COMMIT. A queue's
// dispatcher records a batch of outcomes with three round trips (BEGIN and the settings; the read of the batch;
// the writes and COMMIT) instead of seven, claims with three instead of four, and releases with two instead of
// four. Each round trip is a wait as long as the network's to the database, and a batch holds its rows' locks for
// all of them.
//
// What a queued write returns is not its outcome: its result reports no rows, and its error comes from the read or
// the commit that sends it, which fails the whole transaction. Only statements whose row count nobody reads may be
// queued; the ones that need it (UPDATE … RETURNING, any read) run at once, after the queue.
type pipelinedTx struct {
	bun.Conn
	gen    interface{ FormatQuery(string, ...any) string }
	queued []string
	// err is the first failed send: the transaction fails with it, whatever fn makes of the read that sent it.
	err error
}

// deferredResult is the result of a queued write: it was not run yet.
type deferredResult struct{}

var errNotRunYet = errors.New("store: a write of a pipelined transaction has no result until it commits")

func (deferredResult) LastInsertId() (int64, error) { return 0, errNotRunYet }
func (deferredResult) RowsAffected() (int64, error) { return 0, errNotRunYet }

// ExecContext queues the statement; like database/sql, it refuses to when ctx has ended.
func (p *pipelinedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(args) > 0 {
		query = p.gen.FormatQuery(query, args...)
	}
	p.queued = append(p.queued, query)
	return deferredResult{}, nil
}

// QueryContext sends the queued writes, then runs the read. Like database/sql's transactions, it refuses to when
// ctx has ended (a connection of its own would rather hand the driver the ended context).
func (p *pipelinedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := p.flush(ctx, ""); err != nil {
		return nil, err
	}
	return p.Conn.QueryContext(ctx, query, args...)
}

// QueryRowContext sends the queued writes, then runs the read. database/sql has no row that carries an error of
// ours: when ctx has ended or the send failed, the row fails as one of an ended context, and the transaction fails
// with the real error (p.err). The driver gives that connection up (the pool opens another): a price paid only by
// a transaction that fails anyway.
func (p *pipelinedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if err := ctx.Err(); err != nil && p.err == nil {
		p.err = err
	}
	if err := p.flush(ctx, ""); err != nil {
		failed, cancel := context.WithCancel(ctx)
		cancel()
		return p.Conn.QueryRowContext(failed, query, args...)
	}
	return p.Conn.QueryRowContext(ctx, query, args...)
}

// The query builders run their statements through the pipeline.

func (p *pipelinedTx) NewSelect() *bun.SelectQuery { return p.Conn.NewSelect().Conn(p) }
func (p *pipelinedTx) NewInsert() *bun.InsertQuery { return p.Conn.NewInsert().Conn(p) }
func (p *pipelinedTx) NewUpdate() *bun.UpdateQuery { return p.Conn.NewUpdate().Conn(p) }
func (p *pipelinedTx) NewDelete() *bun.DeleteQuery { return p.Conn.NewDelete().Conn(p) }
func (p *pipelinedTx) NewMerge() *bun.MergeQuery   { return p.Conn.NewMerge().Conn(p) }
func (p *pipelinedTx) NewRaw(query string, args ...any) *bun.RawQuery {
	return p.Conn.NewRaw(query, args...).Conn(p)
}

var errNestedTx = errors.New("store: a transaction cannot begin inside a pipelined transaction")

// BeginTx refuses: the connection is in a transaction already.
func (p *pipelinedTx) BeginTx(context.Context, *sql.TxOptions) (bun.Tx, error) {
	return bun.Tx{}, errNestedTx
}

// RunInTx refuses: the connection is in a transaction already.
func (p *pipelinedTx) RunInTx(context.Context, *sql.TxOptions, func(context.Context, bun.Tx) error) error {
	return errNestedTx
}

// flush sends the queued writes followed by then (a statement, or nothing) in one message.
func (p *pipelinedTx) flush(ctx context.Context, then string) error {
	if p.err != nil {
		return p.err
	}
	if len(p.queued) == 0 && then == "" {
		return nil
	}
	if then != "" {
		p.queued = append(p.queued, then)
	}
	script := strings.Join(p.queued, ";\n")
	p.queued = p.queued[:0]
	// Straight to database/sql: the statements are formatted already, and must not be formatted again.
	if _, err := p.Conn.Conn.ExecContext(ctx, script); err != nil && p.err == nil {
		p.err = err
	}
	return p.err
}

// runPipelined runs fn in a pipelinedTx opened with settings (statements sent with BEGIN, in its round trip) and
// commits it with the writes still queued. Whatever keeps it from committing (an error, a failed send, a panic)
// rolls it back, so the connection goes back to the pool ready for the next caller. (Should the rollback fail too,
// the driver discards a connection that comes back inside a transaction.)
func (db *DB) runPipelined(ctx context.Context, settings string, fn func(ctx context.Context, idb bun.IDB) error) error {
	tctx, cancel, err := db.txContext(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return overBound(tctx, ctx, db.pipelined(tctx, settings, fn))
}

func (db *DB) pipelined(ctx context.Context, settings string, fn func(ctx context.Context, idb bun.IDB) error) error {
	conn, err := db.txw.Conn(ctx)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = conn.Conn.ExecContext(rctx, "ROLLBACK")
			cancel()
		}
		_ = conn.Close()
	}()
	if _, err := conn.Conn.ExecContext(ctx, "BEGIN;\n"+settings); err != nil {
		return err
	}
	p := &pipelinedTx{Conn: conn, gen: db.txw.QueryGen()}
	if err := fn(ctx, p); err != nil {
		if p.err != nil {
			return errors.Join(p.err, err)
		}
		return err
	}
	if err := p.flush(ctx, "COMMIT"); err != nil {
		return err
	}
	committed = true
	db.committed(ctx)
	return nil
}
