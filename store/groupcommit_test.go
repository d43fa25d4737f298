package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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

// A locking group commit locks the keys of every call of a shared transaction before any call runs, sorted and
// once each (so shared transactions, whose calls come in arrival order, take row locks in one order), and a failed
// lock fails every call of its transaction.
func TestGroupCommitLocksKeysFirst(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var mu sync.Mutex
		lockedTx := map[*sql.Tx]bool{}
		var locked [][]string
		g := store.NewLockingGroupCommit(db, 16, func(_ context.Context, tx bun.Tx, keys []string) error {
			mu.Lock()
			defer mu.Unlock()
			lockedTx[tx.Tx] = true
			locked = append(locked, keys)
			if slices.Contains(keys, "refused") {
				return errors.New("lock refused")
			}
			return nil
		})
		const n = 100
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				keys := []string{fmt.Sprintf("k%02d", (n-i)%10), fmt.Sprintf("k%02d", i%10)}
				errs[i] = g.DoFor(ctx, keys, func(_ context.Context, tx bun.Tx) error {
					mu.Lock()
					defer mu.Unlock()
					if !lockedTx[tx.Tx] {
						t.Error("a call ran before the keys of its transaction were locked")
					}
					return nil
				})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		}
		for _, keys := range locked {
			if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
				t.Errorf("locked %v: want sorted keys, each once", keys)
			}
		}
		if err := g.DoFor(ctx, []string{"refused"}, func(context.Context, bun.Tx) error { return nil }); err == nil {
			t.Error("a call whose lock failed returned nil")
		}
	})
}

// The hooks frame every shared transaction: Begin's context reaches each call, End runs once after the last call
// (seeing what the calls that succeeded left, not what a failed one did), and an error of End fails every call.
func TestGroupCommitHooks(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		type shared struct{ calls []int }
		type key struct{}
		var mu sync.Mutex
		var ended [][]int
		failEnd := false
		g := store.NewGroupCommit(db, 16).WithHooks(store.GroupHooks{
			Begin: func(ctx context.Context) context.Context { return context.WithValue(ctx, key{}, &shared{}) },
			End: func(ctx context.Context, _ bun.Tx) error {
				mu.Lock()
				defer mu.Unlock()
				ended = append(ended, ctx.Value(key{}).(*shared).calls)
				if failEnd {
					return errors.New("end refused")
				}
				return nil
			},
		})
		const n = 100
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = g.Do(ctx, func(ctx context.Context, _ bun.Tx) error {
					if i%7 == 0 {
						return errors.New("refused")
					}
					s := ctx.Value(key{}).(*shared)
					s.calls = append(s.calls, i)
					return nil
				})
			})
		}
		wg.Wait()
		var all []int
		for _, calls := range ended {
			all = append(all, calls...)
		}
		slices.Sort(all)
		var want []int
		for i := range n {
			if (errs[i] != nil) != (i%7 == 0) {
				t.Errorf("call %d: %v", i, errs[i])
			}
			if i%7 != 0 {
				want = append(want, i)
			}
		}
		if !slices.Equal(all, want) {
			t.Errorf("End saw calls %v, want each call that succeeded once: %v", all, want)
		}
		failEnd = true
		if err := g.Do(ctx, func(context.Context, bun.Tx) error { return nil }); err == nil {
			t.Error("a call whose transaction's End failed returned nil")
		}
	})
}
