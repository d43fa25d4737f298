package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A write through the pool from inside a transaction — the mistake that kept PATCH /api/v1/sources/{id} from ever
// answering on SQLite — fails at once, naming the statement, instead of waiting for the writer its own transaction
// holds (or, on PostgreSQL, committing apart from it); so does a transaction inside a transaction. The transaction
// itself is untouched: rolled back by its error, or committed when the function goes on.
func TestPoolWriteInsideTransactionFails(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws, _ := db.Workspaces.Create(ctx, "A")
		src := newSource(t, db, ws.ID, "guard-"+string(db.Dialect()))
		var panicked any
		err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			func() {
				defer func() { panicked = recover() }()
				_ = db.Sources.Delete(ctx, ws.ID, src.ID)
			}()
			src.Name = "renamed"
			return db.Sources.Update(ctx, tx, &src)
		})
		if err != nil {
			t.Fatal(err)
		}
		if msg := fmt.Sprint(panicked); !strings.Contains(msg, "DELETE") || !strings.Contains(msg, "inside a transaction") {
			t.Errorf("the pool write inside the transaction: %q", msg)
		}
		if got, err := db.Sources.Get(ctx, ws.ID, src.ID); err != nil || got.Name != "renamed" {
			t.Errorf("after the transaction: %+v %v", got, err)
		}
		err = db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			return db.RunInTx(ctx, func(context.Context, bun.Tx) error { return nil })
		})
		if err == nil {
			t.Error("a transaction inside a transaction ran")
		}
		err = db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			return store.NewGroupCommit(db, 0).Do(ctx, func(context.Context, bun.Tx) error { return nil })
		})
		if err == nil {
			t.Error("a group commit inside a transaction ran")
		}
	})
}

// A transaction bounded by its context (WithTxTimeout, as every request's is) that cannot get the writer within the
// bound — another transaction holds SQLite's single writer, or PostgreSQL's lock on the row it changes — gives up
// with ErrTxTimeout, an error that means "busy, retry" (Unavailable); the holder's work is untouched.
func TestTransactionWithinItsBound(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws, _ := db.Workspaces.Create(ctx, "A")
		src := newSource(t, db, ws.ID, "bound-"+string(db.Dialect()))
		holding, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			held <- db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
				if _, err := db.Sources.Lock(ctx, tx, ws.ID, src.ID); err != nil {
					return err
				}
				close(holding)
				<-release
				return nil
			})
		}()
		<-holding
		bounded := store.WithTxTimeout(ctx, 100*time.Millisecond)
		err := db.RunInTx(bounded, func(ctx context.Context, tx bun.Tx) error {
			s, err := db.Sources.Lock(ctx, tx, ws.ID, src.ID)
			if err != nil {
				return err
			}
			s.Name = "too late"
			return db.Sources.Update(ctx, tx, &s)
		})
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		if !errors.Is(err, store.ErrTxTimeout) || !store.Unavailable(err) {
			t.Fatalf("transaction past its bound: %v", err)
		}
		if got, _ := db.Sources.Get(ctx, ws.ID, src.ID); got.Name != src.Name {
			t.Errorf("the late change was written: %+v", got)
		}
	})
}
