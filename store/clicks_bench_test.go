package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// BenchmarkRecordClicks records batches of 1,000 fresh clicks on SQLite, as the click writer does: of one hot link,
// and spread over 1,000 links (each click then updates rollup and dimension rows of its own). ns/op and allocs/op
// are per batch, building the clicks included. `go test ./store -run - -bench RecordClicks -cpuprofile cpu.prof`
// shows where a click's CPU goes.
func BenchmarkRecordClicks(b *testing.B) {
	for _, spread := range []int{1, 1000} {
		b.Run(fmt.Sprintf("links=%d", spread), func(b *testing.B) {
			db := storetest.SQLite(b)
			ws, err := db.Workspaces.Create(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			ls := make([]*store.Link, spread)
			for i := range ls {
				ls[i] = newLink(ws.ID, "sho.rt", fmt.Sprintf("bench%d", i), nil)
			}
			if refused, err := db.Links.CreateMany(ctx, db.Bun(), ls); err != nil || refused[0] != nil {
				b.Fatal(err, refused[0])
			}
			at := time.Now()
			batch := make([]store.Click, 1000)
			b.ReportAllocs()
			for b.Loop() {
				for i := range batch {
					batch[i] = testClick(ls[i%spread].ID, at, store.ClickHuman, "v1")
					batch[i].UserAgent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
				}
				if _, err := db.Clicks.Record(ctx, batch, store.RecordOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
