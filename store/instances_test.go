package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// NextSequencesOf counts the events of several instances in one statement, each by its own count, after what
// NextSequence counted; an instance that does not exist is ErrNotFound.
func TestInstancesNextSequencesOf(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		c := context.Background()
		ws, err := db.Workspaces.Create(c, "sequences")
		if err != nil {
			t.Fatal(err)
		}
		a := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "a", Provider: "sandbox", Status: "connected", StatusReason: "test"}
		b := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "b", Provider: "sandbox", Status: "connected", StatusReason: "test"}
		var got map[string]int64
		err = db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
			for _, i := range []*store.Instance{&a, &b} {
				if err := db.Instances.Create(ctx, tx, i); err != nil {
					return err
				}
			}
			if _, err := db.Instances.NextSequence(ctx, tx, a.ID); err != nil {
				return err
			}
			var err error
			got, err = db.Instances.NextSequencesOf(ctx, tx, map[string]int{a.ID: 3, b.ID: 2})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got[a.ID] != 4 || got[b.ID] != 2 || len(got) != 2 {
			t.Errorf("last numbers %v, want %s: 4 and %s: 2", got, a.ID, b.ID)
		}
		err = db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
			_, err := db.Instances.NextSequencesOf(ctx, tx, map[string]int{a.ID: 1, "ins_missing": 1})
			return err
		})
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("with an instance that does not exist: %v, want ErrNotFound", err)
		}
		err = db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
			seq, err := db.Instances.NextSequence(ctx, tx, a.ID)
			if err == nil && seq != 5 {
				t.Errorf("after a failed transaction: next %d, want 5 (its counts undone)", seq)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
