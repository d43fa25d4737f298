package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

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

// Get reads an instance only within its workspace (another workspace's, a missing ID and an injection attempt are
// ErrNotFound alike), and Lock and Save round-trip every column they own.
func TestInstancesGetLockSave(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		c := context.Background()
		ws, err := db.Workspaces.Create(c, "get")
		if err != nil {
			t.Fatal(err)
		}
		other, err := db.Workspaces.Create(c, "other")
		if err != nil {
			t.Fatal(err)
		}
		i := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "a", Provider: "sandbox", Status: "connected",
			StatusReason: "test", Metadata: map[string]any{"team": "support"}, Config: map[string]any{"number": "+15550100"}}
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error { return db.Instances.Create(ctx, tx, &i) }); err != nil {
			t.Fatal(err)
		}
		got, err := db.Instances.Get(c, ws.ID, i.ID)
		if err != nil || got.ID != i.ID || got.Name != "a" || got.Metadata["team"] != "support" || got.Config["number"] != "+15550100" {
			t.Fatalf("Get = %+v, %v", got, err)
		}
		for _, k := range [][2]string{{other.ID, i.ID}, {ws.ID, store.NewID("ins")}, {ws.ID, "ins_' OR 1=1 --"}, {"' OR 1=1 --", i.ID}} {
			if _, err := db.Instances.Get(c, k[0], k[1]); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get(%q, %q) = %v, want ErrNotFound", k[0], k[1], err)
			}
		}
		next := got.StatusSince.Add(90 * time.Second)
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
			l, err := db.Instances.Lock(ctx, tx, i.ID)
			if err != nil {
				return err
			}
			l.Status, l.StatusReason, l.ReconnectAttempt, l.ReconnectNextAt = "reconnecting", "network down", 2, &next
			l.Metadata = map[string]any{"team": "sales"}
			return db.Instances.Save(ctx, tx, &l)
		}); err != nil {
			t.Fatal(err)
		}
		got, err = db.Instances.Get(c, ws.ID, i.ID)
		if err != nil || got.Status != "reconnecting" || got.StatusReason != "network down" || got.ReconnectAttempt != 2 ||
			got.ReconnectNextAt == nil || !got.ReconnectNextAt.Equal(next) || got.Metadata["team"] != "sales" {
			t.Errorf("after Lock and Save: %+v, %v", got, err)
		}
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
			_, err := db.Instances.Lock(ctx, tx, store.NewID("ins"))
			return err
		}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Lock of a missing instance = %v, want ErrNotFound", err)
		}
	})
}
