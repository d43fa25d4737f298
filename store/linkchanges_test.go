package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// watchLinks runs db.LinkChanges.Watch until the test ends and returns what it reports.
func watchLinks(t *testing.T, db *store.DB) (changed <-chan store.LinkKey, connected <-chan struct{}) {
	wctx, cancel := context.WithCancel(ctx)
	ch, conn := make(chan store.LinkKey, 16), make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.LinkChanges.Watch(wctx, store.LinkWatch{
			Changed:      func(k store.LinkKey) { ch <- k },
			Connected:    func() { conn <- struct{}{} },
			Disconnected: func() {},
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch, conn
}

// Announce of many keys (a bulk creation's chunk) notifies every process of each key when the transaction commits.
func TestAnnounceManyKeys(t *testing.T) {
	db := storetest.Postgres(t)
	changed, connected := watchLinks(t, db)
	await.Receive(t, "the connection", connected)

	domain := store.NewID("d")[2:14] + ".example"
	keys := []store.LinkKey{{Domain: domain, SlugKey: "a"}, {Domain: domain, SlugKey: "b"}, {Domain: domain, SlugKey: "c d"}}
	if err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return db.LinkChanges.Announce(ctx, tx, keys...)
	}); err != nil {
		t.Fatal(err)
	}
	var heard []store.LinkKey
	for len(heard) < len(keys) {
		if k := await.Receive(t, "the changes", changed); k.Domain == domain { // other tests share the database
			heard = append(heard, k)
		}
	}
	slices.SortFunc(heard, func(a, b store.LinkKey) int { return strings.Compare(a.SlugKey, b.SlugKey) })
	if !slices.Equal(heard, keys) {
		t.Errorf("heard %v, want %v", heard, keys)
	}
	if err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return db.LinkChanges.Announce(ctx, tx)
	}); err != nil {
		t.Errorf("announcing no keys: %v", err)
	}
}
