package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// BenchmarkConcurrentEmits commits events from 8 goroutines at once on PostgreSQL, one event per transaction, as
// concurrent requests do: what it measures is how many such transactions commit per second, which a notification
// sent inside each of them capped (they committed one at a time; see notifyAtCommit). ns/op is per transaction.
// `go test ./store -run - -bench ConcurrentEmits -benchtime 3s`
func BenchmarkConcurrentEmits(b *testing.B) {
	db := storetest.Postgres(b)
	ws, err := db.Workspaces.Create(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(4) // 4 goroutines per core: 8 on two cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ev := store.Event{ID: store.NewID("evt"), WorkspaceID: ws.ID, Type: "bench.emitted",
				Data: []byte(`{"n":1}`), CreatedAt: time.Now().UTC()}
			if err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
				return db.Events.Insert(ctx, tx, []store.Event{ev}, nil)
			}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
