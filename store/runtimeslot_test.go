package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A runtime slot is held by one process at a time: the next lock gets the next slot, and a slot given up (as a
// process's death gives it up) is the first one taken again.
func TestRuntimeSlots(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		host := "host-" + ulid.Make().String()
		lock := func() *store.RuntimeSlot {
			t.Helper()
			s, err := db.LockRuntimeSlot(ctx, host)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		a, b := lock(), lock()
		if a.Name != host+"#0" || b.Name != host+"#1" {
			t.Fatalf("slots %q and %q, want #0 and #1", a.Name, b.Name)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		c := lock()
		defer c.Close()
		defer b.Close()
		if c.Name != host+"#0" {
			t.Errorf("after #0 was given up: %q, want #0 again", c.Name)
		}
	})
}

// The leases a process of a slot left are free to the next process of that slot at once, and to nobody else
// before they run out.
func TestLeasesLeftBySlot(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "Leases")
		inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "i", Provider: "sandbox",
			Status: "connected", StatusReason: "paired"}
		if err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error { return db.Instances.Create(ctx, tx, &inst) }); err != nil {
			t.Fatal(err)
		}
		host := "host-" + ulid.Make().String()
		now := time.Now()
		if took, err := db.InstanceLeases.Acquire(ctx, host+"#0/dead", host+"#0", []string{inst.ID}, now, time.Minute); err != nil || len(took) != 1 {
			t.Fatalf("first acquire: %v %v", took, err)
		}
		free := func(slot string) (bool, bool) {
			t.Helper()
			ids, _, left, err := db.InstanceLeases.Free(ctx, now, slot)
			if err != nil {
				t.Fatal(err)
			}
			return slices.Contains(ids, inst.ID), left[inst.ID]
		}
		if isFree, left := free(host + "#1"); isFree || left {
			t.Errorf("another slot sees the live lease as free (%v) or left to it (%v)", isFree, left)
		}
		if took, _ := db.InstanceLeases.Acquire(ctx, host+"#1/other", host+"#1", []string{inst.ID}, now, time.Minute); len(took) != 0 {
			t.Errorf("another slot took the lease before it ran out")
		}
		if isFree, left := free(host + "#0"); !isFree || !left {
			t.Errorf("the slot's next process: free %v, left %v; want both", isFree, left)
		}
		if took, _ := db.InstanceLeases.Acquire(ctx, host+"#0/next", host+"#0", []string{inst.ID}, now, time.Minute); len(took) != 1 {
			t.Errorf("the slot's next process could not take the lease")
		}
		if holder, _ := db.InstanceLeases.Holder(ctx, inst.ID, now); holder != host+"#0/next" {
			t.Errorf("holder %q", holder)
		}
	})
}

// Acquire takes, in chunks, exactly the instances among those asked for that exist and are free (no lease, one
// that ran out, or one the slot's earlier process left), in the order asked for; a live lease of another process
// and an ID without its instance are left.
func TestAcquireMany(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "Acquire")
		var ids []string
		err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			for range 1203 { // more than two chunks
				inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "i", Provider: "sandbox",
					Status: "connected", StatusReason: "paired"}
				if err := db.Instances.Create(ctx, tx, &inst); err != nil {
					return err
				}
				ids = append(ids, inst.ID)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		host := "host-" + ulid.Make().String()
		now := time.Now()
		live, expired, left := ids[7], ids[600], ids[1100]
		if took, err := db.InstanceLeases.Acquire(ctx, host+"#1/live", host+"#1", []string{live}, now, time.Minute); err != nil || len(took) != 1 {
			t.Fatalf("live lease: %v %v", took, err)
		}
		if took, err := db.InstanceLeases.Acquire(ctx, host+"#1/gone", host+"#1", []string{expired}, now.Add(-2*time.Minute), time.Minute); err != nil || len(took) != 1 {
			t.Fatalf("expired lease: %v %v", took, err)
		}
		if took, err := db.InstanceLeases.Acquire(ctx, host+"#0/dead", host+"#0", []string{left}, now, time.Minute); err != nil || len(took) != 1 {
			t.Fatalf("left lease: %v %v", took, err)
		}
		asked := slices.Clone(ids)
		slices.Reverse(asked) // not the database's order
		asked = append(asked[:500], append([]string{store.NewID("ins")}, asked[500:]...)...)
		took, err := db.InstanceLeases.Acquire(ctx, host+"#0/next", host+"#0", asked, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.DeleteFunc(slices.Clone(asked), func(id string) bool { return id == live || !slices.Contains(ids, id) })
		if !slices.Equal(took, want) {
			t.Fatalf("took %d instances, want %d (all but the live lease and the missing ID, in the order asked)", len(took), len(want))
		}
		for _, id := range []string{expired, left, ids[0]} {
			if h, err := db.InstanceLeases.Holder(ctx, id, now); err != nil || h != host+"#0/next" {
				t.Errorf("%s held by %q (%v), want the new owner", id, h, err)
			}
		}
		if h, _ := db.InstanceLeases.Holder(ctx, live, now); h != host+"#1/live" {
			t.Errorf("the live lease moved to %q", h)
		}
		if again, err := db.InstanceLeases.Acquire(ctx, host+"#2/x", host+"#2", asked, now, time.Minute); err != nil || len(again) != 0 {
			t.Errorf("a second acquire took %d (%v), want none", len(again), err)
		}
	})
}
