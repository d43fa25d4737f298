package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A claim takes the instances' chat heads in turns: an instance with a backlog over many chats, queued first, gets
// at most perInstance of a claim and never crowds out a quiet instance's one message, even when the claim has room
// for fewer items than the busy instance has heads.
func TestSendQueueClaimTakesInstancesInTurns(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		c := context.Background()
		ws, err := db.Workspaces.Create(c, "send queue")
		if err != nil {
			t.Fatal(err)
		}
		queue := func(inst store.Instance, chats int) []string {
			var ids []string
			err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
				var items []store.SendItem
				for i := range chats {
					chat := store.Chat{WorkspaceID: ws.ID, InstanceID: inst.ID, Type: "direct", Address: fmt.Sprintf("+1555010%04d", i)}
					if err := db.Chats.Create(ctx, tx, &chat); err != nil {
						return err
					}
					// Two messages a chat: only the first (the head) can be claimed.
					for range 2 {
						m := store.Message{ID: store.NewID("msg"), WorkspaceID: ws.ID, InstanceID: inst.ID, ChatID: chat.ID,
							Direction: "outbound", Type: "text", Status: "queued", StatusHistory: []store.StatusChange{},
							Metadata: map[string]any{}}
						if err := db.Messages.Create(ctx, tx, &m); err != nil {
							return err
						}
						ids = append(ids, m.ID)
						items = append(items, store.SendItem{MessageID: m.ID, WorkspaceID: ws.ID, InstanceID: inst.ID, Chat: chat.Address})
					}
				}
				return db.SendQueue.Enqueue(ctx, tx, items)
			})
			if err != nil {
				t.Fatal(err)
			}
			return ids
		}
		var insts []store.Instance
		for _, name := range []string{"busy", "quiet"} {
			inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: name, Provider: "sandbox",
				Status: "connected", StatusReason: "test"}
			if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error { return db.Instances.Create(ctx, tx, &inst) }); err != nil {
				t.Fatal(err)
			}
			insts = append(insts, inst)
		}
		busy, quiet := insts[0], insts[1]
		queue(busy, 30)
		quietIDs := queue(quiet, 1)
		ids := []string{busy.ID, quiet.ID}

		claim := func(limit int) ([]store.SendItem, error) {
			var items []store.SendItem
			err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
				var err error
				items, err = db.SendQueue.Claim(ctx, tx, time.Now(), time.Minute, limit, 16, ids, nil,
					func(ctx context.Context, ids []string) error { return db.Instances.LockAll(ctx, tx, ids) })
				return err
			})
			return items, err
		}
		due := func(instances ...string) bool {
			t.Helper()
			ok, err := db.SendQueue.Due(c, time.Now(), instances, nil)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !due(quiet.ID) || due("ins_none") {
			t.Fatal("Due: the quiet instance's head is not due, or an instance without items is")
		}
		got, err := claim(4)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 4 {
			t.Fatalf("claimed %d items, want 4", len(got))
		}
		var sawQuiet bool
		for _, it := range got {
			sawQuiet = sawQuiet || it.MessageID == quietIDs[0]
		}
		if !sawQuiet {
			t.Fatalf("a claim of 4 among a busy instance's 30 heads and a quiet one's 1 left the quiet one out: %+v", got)
		}

		more, err := claim(100)
		if err != nil {
			t.Fatal(err)
		}
		perInstance := map[string]int{}
		for _, it := range more {
			perInstance[it.InstanceID]++
		}
		if perInstance[busy.ID] != 16 || perInstance[quiet.ID] != 0 {
			t.Fatalf("second claim took %v, want 16 of the busy instance (its cap) and none of the quiet one (its chat's head is leased)", perInstance)
		}
		if due(quiet.ID) {
			t.Fatal("Due: the quiet instance's only head is leased, yet it is due")
		}

		// Settle records an outcome only while the item holds its claim's lease: the quiet head is done, a busy
		// item's outcome comes with a lease it no longer holds, another busy item is tried again later.
		var quietHead, stale, retried store.SendItem
		for _, it := range got {
			switch {
			case it.MessageID == quietIDs[0]:
				quietHead = it
			case stale.MessageID == "":
				stale = it
			default:
				retried = it
			}
		}
		var held []string
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
			var err error
			held, err = db.SendQueue.Settle(ctx, tx, []store.SendOutcome{
				{MessageID: quietHead.MessageID, Lease: *quietHead.LeaseUntil, Done: true},
				{MessageID: stale.MessageID, Lease: stale.LeaseUntil.Add(-time.Second), Done: true},
				{MessageID: retried.MessageID, Lease: *retried.LeaseUntil, RetryAt: time.Now().Add(time.Hour), LastError: "later", Attempts: 1},
			})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(held)
		if want := []string{quietHead.MessageID, retried.MessageID}; !slices.Equal(held, sortedCopy(want)) {
			t.Fatalf("Settle recorded %v, want %v (not the item whose lease it did not hold)", held, want)
		}
		// The quiet chat's next message is its head now.
		if !due(quiet.ID) {
			t.Fatal("Due: the quiet chat's second message is not due once its head is done")
		}
		next, err := claim(100)
		if err != nil {
			t.Fatal(err)
		}
		var sawSecond bool
		for _, it := range next {
			sawSecond = sawSecond || it.MessageID == quietIDs[1]
			if it.MessageID == stale.MessageID || it.MessageID == retried.MessageID {
				t.Fatalf("claim took %s: still leased, or waiting for its retry", it.MessageID)
			}
		}
		if !sawSecond {
			t.Fatalf("claim after the quiet head was done left out the quiet chat's second message: %+v", next)
		}
	})
}

// AnyDue answers for the whole queue: nothing queued, everything leased or everything waiting for a later attempt is
// "nothing due"; an item due and not leased is. (A database of its own: the answer covers every workspace.)
func TestSendQueueAnyDue(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		c := context.Background()
		anyDue := func(at time.Time) bool {
			t.Helper()
			ok, err := db.SendQueue.AnyDue(c, at)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if anyDue(time.Now()) {
			t.Fatal("an empty queue has something due")
		}
		ws, err := db.Workspaces.Create(c, "any due")
		if err != nil {
			t.Fatal(err)
		}
		inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "one", Provider: "sandbox",
			Status: "connected", StatusReason: "test"}
		var item store.SendItem
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
			if err := db.Instances.Create(ctx, tx, &inst); err != nil {
				return err
			}
			chat := store.Chat{WorkspaceID: ws.ID, InstanceID: inst.ID, Type: "direct", Address: "+15550100001"}
			if err := db.Chats.Create(ctx, tx, &chat); err != nil {
				return err
			}
			m := store.Message{ID: store.NewID("msg"), WorkspaceID: ws.ID, InstanceID: inst.ID, ChatID: chat.ID,
				Direction: "outbound", Type: "text", Status: "queued", StatusHistory: []store.StatusChange{}, Metadata: map[string]any{}}
			if err := db.Messages.Create(ctx, tx, &m); err != nil {
				return err
			}
			item = store.SendItem{MessageID: m.ID, WorkspaceID: ws.ID, InstanceID: inst.ID, Chat: chat.Address}
			return db.SendQueue.Enqueue(ctx, tx, []store.SendItem{item})
		}); err != nil {
			t.Fatal(err)
		}
		if !anyDue(time.Now()) {
			t.Fatal("a queued item is not due")
		}
		var claimed []store.SendItem
		if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
			claimed, err = db.SendQueue.Claim(ctx, tx, time.Now(), time.Minute, 10, 0, []string{inst.ID}, nil,
				func(ctx context.Context, ids []string) error { return db.Instances.LockAll(ctx, tx, ids) })
			return err
		}); err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %d items, %v", len(claimed), err)
		}
		if anyDue(time.Now()) {
			t.Fatal("the only item is leased, yet something is due")
		}
		if !anyDue(time.Now().Add(2 * time.Minute)) {
			t.Fatal("the item is not due once its lease ran out")
		}
		later := time.Now().Add(time.Hour)
		if err := db.SendQueue.Release(c, db.Bun(), claimed, later); err != nil {
			t.Fatal(err)
		}
		if anyDue(time.Now()) || !anyDue(later.Add(time.Second)) {
			t.Fatal("an item given back for a later attempt is due before it, or not after it")
		}
	})
}

func sortedCopy(xs []string) []string { return slices.Sorted(slices.Values(xs)) }
