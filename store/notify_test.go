package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A transaction's notifications are sent once it has committed — by whichever way it ran: RunInTx, a repeatable
// (pipelined) transaction, or with a context that is not the transaction's (sent inside it then) — and never for
// one that rolled back.
func TestNotificationsFollowTheirCommit(t *testing.T) {
	db := storetest.Postgres(t)
	changed, connected := watchLinks(t, db)
	await.Receive(t, "the connection", connected)
	domain := store.NewID("d")[2:14] + ".example"
	key := func(slug string) store.LinkKey { return store.LinkKey{Domain: domain, SlugKey: slug} }
	heard := func(want string) {
		t.Helper()
		for {
			k := await.Receive(t, "the notification of "+want, changed)
			if k.Domain != domain { // other tests share the database
				continue
			}
			if k.SlugKey != want {
				t.Fatalf("heard %q, want %q", k.SlugKey, want)
			}
			return
		}
	}

	failed := errors.New("rolled back")
	if err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := db.LinkChanges.Announce(ctx, tx, key("rolled-back")); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatal(err)
	}
	if err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return db.LinkChanges.Announce(ctx, tx, key("committed"), key("committed")) // sent once
	}); err != nil {
		t.Fatal(err)
	}
	heard("committed")

	if err := db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
		return db.LinkChanges.Announce(ctx, tx, key("repeatable"))
	}); err != nil {
		t.Fatal(err)
	}
	heard("repeatable")

	outer := ctx
	if err := db.RunInTx(ctx, func(_ context.Context, tx bun.Tx) error {
		return db.LinkChanges.Announce(outer, tx, key("inside"))
	}); err != nil {
		t.Fatal(err)
	}
	heard("inside")
}
