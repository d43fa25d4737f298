package store_test

import (
	"context"
	"errors"
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
		err := db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.Tx) error {
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
		err := db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.Tx) error {
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
