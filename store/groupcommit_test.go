package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Concurrent calls share transactions, and a call that fails — here on a unique key another call of the same
// batch took — rolls back its own writes only: every other call's row is there, each failing call got its error.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.Bun().ExecContext(ctx, "CREATE TABLE event_type_names_probe (workspace_id TEXT NOT NULL, name TEXT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		g := store.NewGroupCommit(db, 16)
		ws, err := db.Workspaces.Create(ctx, "group")
		if err != nil {
			t.Fatal(err)
		}
		const n = 200
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = g.Do(ctx, func(ctx context.Context, tx bun.Tx) error {
					// Two writes per call: the first always succeeds, the second collides for every fifth call.
					name := fmt.Sprintf("type.t%d", i)
					if _, err := tx.ExecContext(ctx, "INSERT INTO event_type_names_probe (workspace_id, name) VALUES (?, ?)", ws.ID, name); err != nil {
						return err
					}
					if i%5 == 0 {
						return errors.New("refused")
					}
					return nil
				})
			}()
		}
		wg.Wait()
		var rows int
		if err := db.Bun().NewSelect().Table("event_type_names_probe").ColumnExpr("count(*)").Scan(ctx, &rows); err != nil {
			t.Fatal(err)
		}
		for i, err := range errs {
			if (i%5 == 0) != (err != nil) {
				t.Errorf("call %d: %v", i, err)
			}
		}
		if rows != n-n/5 {
			t.Errorf("%d rows, want %d (the refused calls' writes rolled back, the others kept)", rows, n-n/5)
		}
	})
}
