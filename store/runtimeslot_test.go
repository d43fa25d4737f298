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
