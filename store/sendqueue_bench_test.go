package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// BenchmarkSendQueueCycle is the send queue's share of a send, under the messaging bench's backlog (4,000 messages
// of one instance to 40 chats): per op, the look (Due), a claim of up to 16 chat heads and their outcomes recorded
// done, in their transactions; the backlog is topped up outside the timer. ns/op is per claim of 16.
func BenchmarkSendQueueCycle(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			db := storetest.SQLite(b)
			if dialect == "postgres" {
				db = storetest.Postgres(b)
			}
			c := context.Background()
			ws, err := db.Workspaces.Create(c, "send queue bench")
			if err != nil {
				b.Fatal(err)
			}
			inst := store.Instance{ID: store.NewID("ins"), WorkspaceID: ws.ID, Name: "busy", Provider: "sandbox",
				Status: "connected", StatusReason: "bench"}
			var chats []store.Chat
			if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
				if err := db.Instances.Create(ctx, tx, &inst); err != nil {
					return err
				}
				for i := range 40 {
					ch := store.Chat{WorkspaceID: ws.ID, InstanceID: inst.ID, Type: "direct", Address: fmt.Sprintf("+1555020%04d", i)}
					if err := db.Chats.Create(ctx, tx, &ch); err != nil {
						return err
					}
					chats = append(chats, ch)
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			next := 0
			add := func(n int) {
				if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
					items := make([]store.SendItem, 0, n)
					for range n {
						ch := chats[next%len(chats)]
						next++
						m := store.Message{ID: store.NewID("msg"), WorkspaceID: ws.ID, InstanceID: inst.ID, ChatID: ch.ID,
							Direction: "outbound", Type: "text", Status: "queued", StatusHistory: []store.StatusChange{},
							Metadata: map[string]any{}}
						if err := db.Messages.Create(ctx, tx, &m); err != nil {
							return err
						}
						items = append(items, store.SendItem{MessageID: m.ID, WorkspaceID: ws.ID, InstanceID: inst.ID, Chat: ch.Address})
					}
					return db.SendQueue.Enqueue(ctx, tx, items)
				}); err != nil {
					b.Fatal(err)
				}
			}
			add(4000)
			ids := []string{inst.ID}
			b.ResetTimer()
			for range b.N {
				if ok, err := db.SendQueue.Due(c, time.Now(), ids, nil); err != nil || !ok {
					b.Fatal("nothing due", err)
				}
				var items []store.SendItem
				if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
					var err error
					items, err = db.SendQueue.Claim(ctx, tx, time.Now(), time.Minute, 16, 16, ids, nil,
						func(ctx context.Context, ids []string) error { return db.Instances.LockAll(ctx, tx, ids) })
					return err
				}); err != nil || len(items) != 16 {
					b.Fatal(len(items), err)
				}
				outs := make([]store.SendOutcome, len(items))
				for i, it := range items {
					outs[i] = store.SendOutcome{MessageID: it.MessageID, Lease: *it.LeaseUntil, Done: true}
				}
				if err := db.RunInTx(c, func(ctx context.Context, tx bun.Tx) error {
					_, err := db.SendQueue.Settle(ctx, tx, outs)
					return err
				}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				add(len(items))
				b.StartTimer()
			}
		})
	}
}
