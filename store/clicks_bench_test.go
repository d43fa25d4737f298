package store_test

import (
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// BenchmarkRecordClicks records batches of 1,000 fresh clicks of one link on SQLite, as the click writer does under
// a hot link (ns/op and allocs/op are per batch; building the clicks is counted too). `go test ./store -run -
// -bench RecordClicks -cpuprofile cpu.prof` shows where a click's CPU goes.
func BenchmarkRecordClicks(b *testing.B) {
	db := storetest.SQLite(b)
	ws, err := db.Workspaces.Create(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	l := newLink(ws.ID, "sho.rt", "bench", nil)
	if err := createLink(db, db.Bun(), l); err != nil {
		b.Fatal(err)
	}
	at := time.Now()
	batch := make([]store.Click, 1000)
	b.ReportAllocs()
	for b.Loop() {
		for i := range batch {
			batch[i] = testClick(l.ID, at, store.ClickHuman, "v1")
			batch[i].UserAgent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
		}
		if _, err := db.Clicks.Record(ctx, batch, store.RecordOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
