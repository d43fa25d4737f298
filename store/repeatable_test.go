package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store/storetest"
)

// The settings of a repeatable transaction (asynchronous commit, the planner's restrictions) hold inside it and
// end with it, committed or rolled back: the pooled connection goes back to the next caller as it was.
func TestRepeatableTxSettingsStayInTheTransaction(t *testing.T) {
	ctx := context.Background()
	db := storetest.Postgres(t)
	db.Bun().SetMaxOpenConns(1) // every statement below runs on the one connection
	show := func(q bun.IDB, name string) string {
		t.Helper()
		var v string
		if err := q.NewRaw("SELECT current_setting(?)", name).Scan(ctx, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	failed := errors.New("refused")
	for _, outcome := range []error{nil, failed} {
		err := db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
			if sc, seq := show(tx, "synchronous_commit"), show(tx, "enable_seqscan"); sc != "off" || seq != "off" {
				t.Errorf("inside: synchronous_commit %s, enable_seqscan %s; want off, off", sc, seq)
			}
			return outcome
		})
		if !errors.Is(err, outcome) {
			t.Fatalf("RunInRepeatableTx returned %v, want %v", err, outcome)
		}
		if sc, seq := show(db.Bun(), "synchronous_commit"), show(db.Bun(), "enable_seqscan"); sc != "on" || seq != "on" {
			t.Errorf("after a transaction that returned %v: synchronous_commit %s, enable_seqscan %s; want on, on", outcome, sc, seq)
		}
	}
	if _, err := db.Deliveries.Claim(ctx, time.Now(), time.Minute, 10, nil); err != nil {
		t.Fatal(err)
	}
	if sort, bitmap := show(db.Bun(), "enable_sort"), show(db.Bun(), "enable_bitmapscan"); sort != "on" || bitmap != "on" {
		t.Errorf("after a claim: enable_sort %s, enable_bitmapscan %s; want on, on", sort, bitmap)
	}
}

// On SQLite a repeatable transaction is an ordinary one: committed when fn succeeds, rolled back when it fails.
func TestRepeatableTxOnSQLite(t *testing.T) {
	ctx := context.Background()
	db := storetest.SQLite(t)
	if _, err := db.Bun().ExecContext(ctx, "CREATE TABLE repeatable (n INTEGER)"); err != nil {
		t.Fatal(err)
	}
	for i, outcome := range []error{nil, errors.New("refused")} {
		err := db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO repeatable (n) VALUES (?)", i); err != nil {
				return err
			}
			return outcome
		})
		if !errors.Is(err, outcome) {
			t.Fatalf("RunInRepeatableTx returned %v, want %v", err, outcome)
		}
	}
	var ns []int
	if err := db.Bun().NewRaw("SELECT n FROM repeatable").Scan(ctx, &ns); err != nil || len(ns) != 1 || ns[0] != 0 {
		t.Errorf("rows %v (%v), want [0]: the failed transaction's row must be rolled back", ns, err)
	}
}

// On PostgreSQL a repeatable transaction is pipelined: writes wait and go to the server with the next read or with
// COMMIT. A read sees the writes before it, a write that fails fails the transaction (everything before it rolled
// back), and whatever ends the transaction without a commit (an error, a cancelled context, a panic) leaves the
// pooled connection outside any transaction for the next caller.
func TestPipelinedRepeatableTx(t *testing.T) {
	ctx := context.Background()
	db := storetest.Postgres(t)
	db.Bun().SetMaxOpenConns(1) // the next caller gets the very connection the transaction used
	if _, err := db.Bun().ExecContext(ctx, "CREATE TABLE pipelined (n INTEGER PRIMARY KEY, note TEXT)"); err != nil {
		t.Fatal(err)
	}
	rows := func() []int {
		t.Helper()
		var ns []int
		if err := db.Bun().NewRaw("SELECT n FROM pipelined ORDER BY n").Scan(ctx, &ns); err != nil {
			t.Fatal(err)
		}
		return ns
	}
	backend := func() (pid int) {
		t.Helper()
		if err := db.Bun().NewRaw("SELECT pg_backend_pid()").Scan(ctx, &pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	first := backend()
	// outsideTx checks that the pooled connection is outside any transaction and, unless the transaction was cut
	// off (a cancelled context closes the connection), that it is still the same one: rolled back, not discarded.
	outsideTx := func(when string, same bool) {
		t.Helper()
		var autocommit bool
		if err := db.Bun().NewRaw("SELECT now() = statement_timestamp()").Scan(ctx, &autocommit); err != nil || !autocommit {
			t.Errorf("%s: the pooled connection is still in a transaction (%v)", when, err)
		}
		if pid := backend(); same && pid != first {
			t.Errorf("%s: the connection was replaced (backend %d, was %d)", when, pid, first)
		} else {
			first = pid
		}
	}
	insert := func(tx bun.IDB, n int, note string) error {
		// A value with a question mark and a quote: the queued statement is sent as formatted, never formatted again.
		_, err := tx.NewRaw("INSERT INTO pipelined (n, note) VALUES (?, ?)", n, note).Exec(ctx)
		return err
	}

	err := db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
		for n := range 3 {
			if err := insert(tx, n, "what's this?"); err != nil {
				return err
			}
		}
		var seen int
		if err := tx.NewRaw("SELECT count(*) FROM pipelined").Scan(ctx, &seen); err != nil || seen != 3 {
			t.Errorf("a read inside saw %d rows (%v); want the 3 written before it", seen, err)
		}
		if err := insert(tx, 4, ""); err != nil {
			return err
		}
		if n, err := tx.NewSelect().Table("pipelined").Count(ctx); err != nil || n != 4 { // a single-row read
			t.Errorf("a count inside saw %d rows (%v); want the 4 written before it", n, err)
		}
		if _, err := tx.NewDelete().Table("pipelined").Where("n = ?", 4).Exec(ctx); err != nil {
			return err
		}
		res, err := tx.NewUpdate().Table("pipelined").Set("note = ?", "updated").Where("n = ?", 0).Exec(ctx)
		if err != nil {
			return err
		}
		if _, err := res.RowsAffected(); err == nil {
			t.Error("a queued write reported a row count before it ran")
		}
		if err := tx.RunInTx(ctx, nil, func(context.Context, bun.Tx) error { return nil }); err == nil {
			t.Error("a transaction began inside the pipelined one")
		}
		return insert(tx, 3, "the last write, sent with COMMIT")
	})
	if err != nil || !slices.Equal(rows(), []int{0, 1, 2, 3}) {
		t.Fatalf("committed: %v, rows %v", err, rows())
	}
	var note string
	if err := db.Bun().NewRaw("SELECT note FROM pipelined WHERE n = 1").Scan(ctx, &note); err != nil || note != "what's this?" {
		t.Errorf("note %q (%v)", note, err)
	}
	outsideTx("after a commit", true)

	// A duplicate key among the queued writes: the commit fails with PostgreSQL's error and nothing stays.
	err = db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
		if err := insert(tx, 10, ""); err != nil {
			return err
		}
		return insert(tx, 0, "")
	})
	if err == nil || !strings.Contains(err.Error(), "duplicate key") {
		t.Errorf("a duplicate key committed as %v", err)
	}
	outsideTx("after a failed commit", true)
	// The same failure sent by a read: the read fails, and so does the transaction, whatever fn returns.
	err = db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
		_ = insert(tx, 11, "")
		_ = insert(tx, 0, "")
		var n int
		if err := tx.NewRaw("SELECT count(*) FROM pipelined").Scan(ctx, &n); err == nil {
			t.Error("a read after a failing write succeeded")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "duplicate key") {
		t.Errorf("a transaction whose read sent a failing write returned %v", err)
	}
	outsideTx("after a failed read", true)
	// The same through a single-row read (database/sql's Row cannot carry the send's error; the transaction does).
	err = db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
		_ = insert(tx, 11, "")
		_ = insert(tx, 0, "")
		if _, err := tx.NewSelect().Table("pipelined").Count(ctx); err == nil {
			t.Error("a single-row read after a failing write succeeded")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "duplicate key") {
		t.Errorf("a transaction whose single-row read sent a failing write returned %v", err)
	}
	outsideTx("after a failed single-row read", false) // the ended context's row costs the connection
	// fn's own error, a cancelled context, a panic: rolled back.
	refused := errors.New("refused")
	if err := db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
		var n int
		_ = tx.NewRaw("SELECT 1").Scan(ctx, &n) // the transaction has begun on the server
		_ = insert(tx, 12, "")
		return refused
	}); !errors.Is(err, refused) {
		t.Errorf("fn's error came back as %v", err)
	}
	outsideTx("after fn failed", true)
	cctx, cancel := context.WithCancel(ctx)
	if err := db.RunInRepeatableTx(cctx, func(ctx context.Context, tx bun.IDB) error {
		_ = insert(tx, 13, "")
		cancel()
		return nil
	}); err == nil {
		t.Error("a transaction whose context was cancelled committed")
	}
	outsideTx("after a cancelled context", false)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not go on")
			}
		}()
		_ = db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
			_ = insert(tx, 14, "")
			panic("boom")
		})
	}()
	outsideTx("after a panic", true)
	if got := rows(); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("rows %v after the failed transactions; want [0 1 2 3]", got)
	}
}
